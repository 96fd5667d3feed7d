"""Gang scheduling, pure: the PodGroup of one gang attempt and what each Pod carries to join it.

Each integration (`spec.scheduling.gang`) is a module of `render/gangs/` (kubernetes,
volcano, coscheduling, kueue) behind its registry; this module renders through it.

Each PodGroup-based attempt gets its own PodGroup (`names.pod_group_name`), owned by the
DDPJob; the operator deletes the one of an attempt that ended. Kueue's group is the job's
name for every attempt.
"""

from __future__ import annotations

from typing import Any

from ddpjob.api.spec import DDPJob
from ddpjob.render.gangs import DEFAULT_OPTIONS, INTEGRATIONS, POD_GROUP_KINDS, GangOptions

__all__ = ["DEFAULT_OPTIONS", "GangOptions", "POD_GROUP_KINDS", "apply_to_pod", "pod_group_name", "render_pod_group"]


def pod_group_name(job: DDPJob, attempt: int) -> str | None:
    integration = INTEGRATIONS.get(job.scheduling.gang)
    return integration.group_name(job, attempt) if integration else None


def render_pod_group(job: DDPJob, attempt: int, pod: dict, owner_references: list[dict],
                     labels: dict[str, str]) -> dict | None:
    """The PodGroup of attempt `attempt` (None when the integration has none). `pod` is
    one rendered Pod of the attempt: the gang's resources are its requests times its
    minimum, `job.min_nodes` (every node of a rigid gang, `elastic.minNodes` otherwise)."""
    integration = INTEGRATIONS.get(job.scheduling.gang)
    if integration is None or integration.pod_group is None or integration.pod_group_spec is None:
        return None
    api_version, kind = integration.pod_group
    meta: dict[str, Any] = {"name": integration.group_name(job, attempt), "namespace": job.namespace,
                            "labels": labels}
    if owner_references:
        meta["ownerReferences"] = owner_references
    return {"apiVersion": api_version, "kind": kind, "metadata": meta,
            "spec": integration.pod_group_spec(job, pod)}


def apply_to_pod(pod: dict, job: DDPJob, attempt: int, options: GangOptions = DEFAULT_OPTIONS) -> dict:
    """Add the gang's fields to a rendered Pod (after the user's template: these win)."""
    if job.scheduling.priority_class_name:
        pod["spec"]["priorityClassName"] = job.scheduling.priority_class_name
    integration = INTEGRATIONS.get(job.scheduling.gang)
    if integration is not None:
        integration.join(pod, job, integration.group_name(job, attempt), options)
    return pod
