"""The development cluster: a Kubernetes API emulator (on kmock), a process kubelet that
runs Pods as local processes, a CRD validator, and `LocalCluster`, which puts them together
with the real operator. Used by the tests, `make demo-cluster` and the benchmarks."""
