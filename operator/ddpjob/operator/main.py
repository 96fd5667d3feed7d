"""Entry point of the operator process, for `ddpjob operator ...`.

Equivalent to `kopf run -m ddpjob.operator.handlers [--standalone] [--liveness=URL]
[--namespace=NS | --all-namespaces] [--peering=NAME]`, plus /metrics.
"""

from __future__ import annotations

import gc
import os
import random

# Collections of the youngest generation, in allocations: 20 times Python's default. The
# operator allocates thousands of objects per watch event and API call, nearly all freed
# by reference counting; at the default the cyclic collector ran every few events, with
# full collections over kopf's per-Pod memories: 0.25-0.34 s of CPU in a 1,024-Pod create
# burst, 0.14-0.18 s with this and the freeze below (docs/benchmarks.md).
GC_YOUNG_THRESHOLD = 14_000


def tune_gc() -> None:
    """For the operator's own process, before kopf starts: everything loaded by now
    (modules, kopf's registry) lives as long as the process, so it is frozen out of
    every later collection, which also runs less often. (Not in the handlers' startup:
    tests run operators inside the test process, whose objects must stay collectable.)"""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)


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

    if metrics_port:
        os.environ[handlers.METRICS_PORT_ENV] = str(metrics_port)
    if not standalone and priority is None:
        priority = random.randint(1, 2**31 - 1)
    kopf.configure(verbose=False)
    tune_gc()
    kopf.run(
        standalone=standalone,
        peering_name=None if standalone else peering,
        priority=None if standalone else priority,
        liveness_endpoint=liveness,
        clusterwide=namespace is None,
        namespaces=[namespace] if namespace else (),
    )
