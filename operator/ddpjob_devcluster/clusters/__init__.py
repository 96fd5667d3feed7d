"""A whole development cluster with the real operator: `real.RealCluster` (the real control
plane, process kubelets as Nodes); `client.ClusterClient` is what a test does with it, and
`lifecycle.Cluster` how it starts and stops."""
