"""The development cluster: Kubernetes on one machine, for the tests, `make demo-cluster` and
the benchmarks. Each folder is the part it plays:

- `controlplane/`: the real upstream components (etcd, kube-apiserver, ...) and the gang
  schedulers and queues, built from pinned modules;
- `kubelet/`: the process kubelet, which runs Pods as local processes (a Node's, with
  `controlplane/node.py`);
- `clusters/`: a whole cluster with the real operator on the control plane (`RealCluster`)
  and what a test or a demo asks of it (`ClusterClient`);
- `scenarios/`: what the tests and benchmarks do to a cluster (gang deadlock, a Pod lost
  from an elastic job, a struggling API server);
- `demo/`: `make demo-cluster`.
"""
