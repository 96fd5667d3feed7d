"""The gang-scheduling integrations (`spec.scheduling.gang`), one module each, behind this registry.

The renderer (`render/gang.py`) renders through it, the operator (`operator/gang.py`)
checks API discovery for each integration's PodGroup with it, and the API client
(`operator/kube.py`) learns from it where PodGroups live. A new integration is one
module with an `INTEGRATION` and one line here (and its name in `api.scheduling.GANGS`,
the CRD's enum).
"""
from __future__ import annotations

from ddpjob.render.gangs import coscheduling, kubernetes, kueue, volcano
from ddpjob.render.gangs.base import DEFAULT_OPTIONS, GangOptions, Integration

INTEGRATIONS: dict[str, Integration] = {
    module.INTEGRATION.name: module.INTEGRATION for module in (kubernetes, volcano, coscheduling, kueue)}
# The PodGroup of each integration that has one, as (apiVersion, kind).
POD_GROUP_KINDS: dict[str, tuple[str, str]] = {
    name: i.pod_group for name, i in INTEGRATIONS.items() if i.pod_group is not None}
# (apiVersion, kind) -> plural, for the API client's paths.
POD_GROUP_PLURALS: dict[tuple[str, str], str] = {
    i.pod_group: i.plural for i in INTEGRATIONS.values() if i.pod_group is not None and i.plural}

__all__ = ["DEFAULT_OPTIONS", "GangOptions", "INTEGRATIONS", "Integration", "POD_GROUP_KINDS", "POD_GROUP_PLURALS"]
