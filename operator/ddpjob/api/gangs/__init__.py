"""The gang-scheduling integrations (`spec.scheduling.gang`): one module of pure
description each (base.Integration), behind this registry.

Everything reads them through here: the API's check of `spec.scheduling`, the renderer
(render/gang.py), the job logic (job/gang_wait.py, the PodGroups an ended attempt leaves),
and the operator (its settings, API discovery, the API client's paths, and the one reader
of what an integration says of Pods it holds). A new integration is one module with an
`INTEGRATION`, added to BUILT_IN below; `register` takes one from anywhere else (the tests
register a fake one). On a real cluster it also needs its name in the CRD's enum and, for
its objects, the chart's RBAC: what the API server and the cluster's admin decide.
"""

from __future__ import annotations

from ddpjob.api.gangs import coscheduling, kubernetes, kueue, volcano
from ddpjob.api.gangs.base import GangJob, Integration, PodGroupKind, Reads, SchedulerSetting

__all__ = [
    "BUILT_IN",
    "GangJob",
    "Integration",
    "PodGroupKind",
    "Reads",
    "SchedulerSetting",
    "get",
    "names",
    "register",
    "unregister",
]

BUILT_IN: tuple[Integration, ...] = tuple(m.INTEGRATION for m in (kubernetes, volcano, coscheduling, kueue))
_REGISTRY: dict[str, Integration] = {}


def register(integration: Integration) -> None:
    """Serve one more integration (ValueError for a name taken, or `none`)."""
    if integration.name == "none" or integration.name in _REGISTRY:
        raise ValueError(f"gang integration {integration.name!r} is already known")
    _REGISTRY[integration.name] = integration


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def get(name: str | None) -> Integration | None:
    """The integration of `spec.scheduling.gang`; None for `none` (and unknown names)."""
    return _REGISTRY.get(name or "")


def names() -> tuple[str, ...]:
    """Every integration served, in the order registered."""
    return tuple(_REGISTRY)


for _integration in BUILT_IN:
    register(_integration)
