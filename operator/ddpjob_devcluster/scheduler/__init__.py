"""The development cluster's kube-scheduler: Pods placed on Nodes with GPU capacity, and
gangs placed all or nothing."""
