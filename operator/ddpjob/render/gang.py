"""Gang scheduling, pure: the PodGroup of one gang attempt and what each Pod carries to join it.

Each integration (`spec.scheduling.gang`) is a module of pure description in
`api/gangs/` behind its registry; this module renders through it. Every integration
names a group per gang attempt (`Integration.group_name`: `<job>-attempt-<n>` for the
built-in ones, Kueue's included); one with a PodGroup gets its own per attempt, owned by
the DDPJob, and the operator deletes the one of an attempt that ended.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ddpjob.api import gangs
from ddpjob.api.gangs import Integration
from ddpjob.api.spec import DDPJob

__all__ = ["DEFAULT_OPTIONS", "GangOptions", "apply_to_pod", "has_pod_group", "pod_group_name", "render_pod_group"]


@dataclass(frozen=True)
class GangOptions:
    """Cluster-side settings (the operator's chart values), not the job's: the scheduler
    the Pods of each integration name, where it is not the integration's default."""

    schedulers: Mapping[str, str] = field(default_factory=dict)  # integration -> scheduler name

    def scheduler(self, integration: Integration) -> str | None:
        if integration.scheduler is None:
            return None
        return self.schedulers.get(integration.name) or integration.scheduler.default


DEFAULT_OPTIONS = GangOptions()


def pod_group_name(job: DDPJob, attempt: int) -> str | None:
    integration = gangs.get(job.scheduling.gang)
    return integration.group_name(job, attempt) if integration else None


def render_pod_group(
    job: DDPJob, attempt: int, pod: dict[str, Any], owner_references: list[dict[str, Any]], labels: dict[str, str]
) -> dict[str, Any] | None:
    """The PodGroup of attempt `attempt` (None when the integration has none). `pod` is
    one rendered Pod of the attempt: the gang's resources are its requests times its
    minimum, `job.min_nodes` (every node of a rigid gang, `elastic.minNodes` otherwise)."""
    integration = gangs.get(job.scheduling.gang)
    if integration is None or integration.pod_group is None or integration.pod_group_spec is None:
        return None
    meta: dict[str, Any] = {"name": integration.group_name(job, attempt), "namespace": job.namespace, "labels": labels}
    if owner_references:
        meta["ownerReferences"] = owner_references
    return {
        "apiVersion": integration.pod_group.api_version,
        "kind": integration.pod_group.kind,
        "metadata": meta,
        "spec": integration.pod_group_spec(job, pod),
    }


def apply_to_pod(
    pod: dict[str, Any], job: DDPJob, attempt: int, options: GangOptions = DEFAULT_OPTIONS
) -> dict[str, Any]:
    """Add the gang's fields to a rendered Pod (after the user's template: these win)."""
    if job.scheduling.priority_class_name:
        pod["spec"]["priorityClassName"] = job.scheduling.priority_class_name
    integration = gangs.get(job.scheduling.gang)
    if integration is not None:
        integration.join(pod, job, integration.group_name(job, attempt), options.scheduler(integration))
    return pod


def has_pod_group(job: DDPJob) -> bool:
    integration = gangs.get(job.scheduling.gang)
    return integration is not None and integration.pod_group is not None
