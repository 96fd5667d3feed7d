"""Whole development clusters with the real operator: `local.LocalCluster` (the emulator, the
development scheduler, the process kubelet) and `real.RealCluster` (the real control plane);
`client.ClusterClient` is what a test does with either."""
