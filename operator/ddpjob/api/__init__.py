"""The DDPJob API: names, the typed model, defaults and validation. Pure: no kopf, no
Kubernetes client, no processes."""
