"""The development cluster: Kubernetes on one machine, for the tests, `make demo-cluster` and
the benchmarks. Each folder is the part it plays:

- `apiserver/`: a Kubernetes API server emulated on kmock (requests, admission, printing), with
  `registry/`, what it does to the objects it stores;
- `kubelet/`: the process kubelet, which runs Pods as local processes;
- `scheduler/`: the development kube-scheduler (Nodes, GPUs, PodGroups);
- `controlplane/`: the real upstream components (etcd, kube-apiserver, ...) and the gang
  schedulers and queues, built from pinned modules;
- `clusters/`: whole clusters with the real operator: `LocalCluster` on the emulator,
  `RealCluster` on the control plane, one client API for both;
- `scenarios/`: what the tests and benchmarks do to a cluster (gang deadlock, a Pod lost
  from an elastic job, a struggling API server);
- `demo/`: `make demo-cluster`.
"""
