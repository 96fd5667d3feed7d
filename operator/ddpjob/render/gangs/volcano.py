"""Volcano: a `scheduling.volcano.sh/v1beta1` PodGroup (minMember, minResources, queue,
priorityClassName); Pods name it in the `scheduling.k8s.io/group-name` annotation
(volcano-sh/apis pkg/apis/scheduling/v1beta1/labels.go, KubeGroupNameAnnotationKey) and set
`schedulerName: volcano` (the chart's name for it).
"""
from __future__ import annotations

from decimal import Decimal
from typing import Any

from ddpjob.api import names
from ddpjob.api.quantity import format_quantity, is_bytes, parse_quantity
from ddpjob.api.spec import DDPJob
from ddpjob.render.gangs.base import GangOptions, Integration

API = "scheduling.volcano.sh/v1beta1"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"


def pod_requests(pod: dict) -> dict[str, Decimal]:
    """One Pod's requests, as the scheduler counts them: a container's limit is its
    request where no request is given (the API server defaults it so)."""
    total: dict[str, Decimal] = {}
    for container in pod["spec"].get("containers", []):
        res = container.get("resources") or {}
        for key, qty in {**(res.get("limits") or {}), **(res.get("requests") or {})}.items():
            total[key] = total.get(key, Decimal(0)) + parse_quantity(qty)
    return total


def gang_requests(pod: dict, nodes: int) -> dict[str, str]:
    """What the whole gang requests: one Pod's requests times the nodes (every Pod of a
    gang has the same resources; only names and env differ per rank)."""
    return {key: format_quantity(qty * nodes, binary=is_bytes(key))
            for key, qty in sorted(pod_requests(pod).items())}


def pod_group_spec(job: DDPJob, pod: dict) -> dict[str, Any]:
    # minResources lets Volcano's enqueue action admit the group only when the queue
    # can hold all of it; "if queue does not exist, the PodGroup will not be scheduled".
    spec: dict[str, Any] = {"minMember": job.min_nodes, "queue": job.scheduling.queue or "default",
                            "minResources": gang_requests(pod, job.min_nodes)}
    if job.scheduling.priority_class_name:
        spec["priorityClassName"] = job.scheduling.priority_class_name
    return spec


def join(pod: dict, job: DDPJob, group: str, options: GangOptions) -> None:
    pod["spec"]["schedulerName"] = options.volcano_scheduler
    pod["metadata"].setdefault("annotations", {})[GROUP_ANNOTATION] = group


INTEGRATION = Integration(
    name="volcano", pod_group=(API, "PodGroup"), plural="podgroups",
    needs="Volcano's scheduling.volcano.sh/v1beta1 PodGroup CRD (install Volcano)",
    group_name=lambda job, attempt: names.pod_group_name(job.name, attempt),
    pod_group_spec=pod_group_spec, join=join)
