"""The native gang: a `scheduling.k8s.io/v1beta1` PodGroup (`schedulingPolicy.gang.minCount`)
and `spec.schedulingGroup.podGroupName` on every Pod.

The default scheduler holds the Pods until the group exists and minCount Pods are
created, then places them all or none
(https://kubernetes.io/docs/concepts/scheduling-eviction/gang-scheduling/; Kubernetes 1.37,
GenericWorkload feature gate). The docs' order is PodGroup, then Pods
(https://kubernetes.io/docs/concepts/workloads/podgroup-api/lifecycle/). Its Pods carry
their own words (the scheduler's PodScheduled condition): nothing to read.
"""

from __future__ import annotations

from typing import Any

from ddpjob.api.gangs.base import GangJob, Integration, PodGroupKind

API = "scheduling.k8s.io/v1beta1"


def pod_group_spec(job: GangJob, pod: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": job.min_nodes}}}
    if job.scheduling.priority_class_name:
        spec["priorityClassName"] = job.scheduling.priority_class_name
    return spec


def join(pod: dict[str, Any], job: GangJob, group: str, scheduler: str | None) -> None:
    # All Pods of a group must use the same scheduler: the default one.
    pod["spec"].pop("schedulerName", None)
    pod["spec"]["schedulingGroup"] = {"podGroupName": group}


INTEGRATION = Integration(
    name="kubernetes",
    needs="the scheduling.k8s.io/v1beta1 PodGroup API (Kubernetes 1.37 with the GenericWorkload "
    "feature gate and the scheduling.k8s.io/v1beta1 API turned on)",
    pod_group=PodGroupKind(API, "PodGroup", "podgroups"),
    pod_group_spec=pod_group_spec,
    join=join,
)
