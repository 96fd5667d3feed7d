"""Entry point of the operator process, for `ddpjob operator ...`.

Equivalent to `kopf run -m ddpjob.operator.handlers [--standalone] [--liveness=URL]
[--namespace=NS | --all-namespaces] [--peering=NAME]`, plus /metrics. The settings go to
the handlers as one typed object (`memo.settings`), never through the environment: the
caller's flags are applied to `settings.from_env()` here.
"""

from __future__ import annotations

import dataclasses
import random

from ddpjob import gc_tuning
from ddpjob.operator import settings as operator_settings


def run_operator(
    namespace: str | None,
    standalone: bool,
    liveness: str | None,
    metrics_port: int | None,
    peering: str | None,
    priority: int | None = None,
    settings: operator_settings.Settings | None = None,
) -> None:
    """Run until SIGTERM/SIGINT. `operator_settings.SettingsError` (one line) for a bad
    setting, before anything starts.

    namespace: serve one namespace; None serves the whole cluster.
    standalone: one replica, no peering (no kopf peering CRDs needed).
    liveness: e.g. http://0.0.0.0:8080/healthz (kopf's probe endpoint).
    metrics_port: serve Prometheus /metrics on this port (None: the settings' own).
    peering: the kopf peering object that elects the active replica; replicas pause
      while a peer with a higher priority is alive. Each replica picks a random
      priority (unless given), so exactly one of several replicas is active.
    settings: the operator's settings (None: read from the environment, `settings.from_env`).
    """
    import kopf

    from ddpjob.operator import handlers  # noqa: F401  (registers the handlers with kopf)

    settings = settings if settings is not None else operator_settings.from_env()
    if metrics_port:
        settings = dataclasses.replace(settings, metrics_port=metrics_port)
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
        memo=kopf.Memo(settings=settings),
    )
