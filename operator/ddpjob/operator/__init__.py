"""The kopf operator: handlers (triggers), the controller (work queue, expectations,
reconcile), the one API module (`kube`) and Prometheus metrics."""
