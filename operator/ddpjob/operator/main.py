"""Entry point of the operator process, for `ddpjob operator ...`.

Equivalent to `kopf run -m ddpjob.operator.handlers [--standalone] [--liveness=URL]
[--namespace=NS | --all-namespaces] [--peering=NAME]`, plus /metrics.
"""

from __future__ import annotations

import os
import random

from ddpjob import gc_tuning


def run_operator(namespace: str | None, standalone: bool, liveness: str | None,
                 metrics_port: int | None, peering: str | None, priority: int | None = None) -> None:
    """Run until SIGTERM/SIGINT.

    namespace: serve one namespace; None serves the whole cluster.
    standalone: one replica, no peering (no kopf peering CRDs needed).
    liveness: e.g. http://0.0.0.0:8080/healthz (kopf's probe endpoint).
    metrics_port: serve Prometheus /metrics on this port (None: off).
    peering: the kopf peering object that elects the active replica; replicas pause
      while a peer with a higher priority is alive. Each replica picks a random
      priority (unless given), so exactly one of several replicas is active.
    """
    import kopf

    from ddpjob.operator import handlers  # noqa: F401  (registers the handlers with kopf)
    from ddpjob.operator.settings import METRICS_PORT_ENV

    if metrics_port:
        os.environ[METRICS_PORT_ENV] = str(metrics_port)
    if not standalone and priority is None:
        priority = random.randint(1, 2**31 - 1)
    kopf.configure(verbose=False)
    gc_tuning.tune_for_long_running_server()
    kopf.run(
        standalone=standalone,
        peering_name=None if standalone else peering,
        priority=None if standalone else priority,
        liveness_endpoint=liveness,
        clusterwide=namespace is None,
        namespaces=[namespace] if namespace else (),
    )
