"""The native gang: a `scheduling.k8s.io/v1beta1` PodGroup (`schedulingPolicy.gang.minCount`)
and `spec.schedulingGroup.podGroupName` on every Pod.

The default scheduler holds the Pods until the group exists and minCount Pods are
created, then places them all or none
(https://kubernetes.io/docs/concepts/scheduling-eviction/gang-scheduling/; Kubernetes 1.37,
GenericWorkload feature gate). The docs' order is PodGroup, then Pods
(https://kubernetes.io/docs/concepts/workloads/podgroup-api/lifecycle/).
"""
from __future__ import annotations

from typing import Any

from ddpjob.api import names
from ddpjob.api.spec import DDPJob
from ddpjob.render.gangs.base import GangOptions, Integration

API = "scheduling.k8s.io/v1beta1"


def pod_group_spec(job: DDPJob, pod: dict) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": job.min_nodes}}}
    if job.scheduling.priority_class_name:
        spec["priorityClassName"] = job.scheduling.priority_class_name
    return spec


def join(pod: dict, job: DDPJob, group: str, options: GangOptions) -> None:
    # All Pods of a group must use the same scheduler: the default one.
    pod["spec"].pop("schedulerName", None)
    pod["spec"]["schedulingGroup"] = {"podGroupName": group}


INTEGRATION = Integration(
    name="kubernetes", pod_group=(API, "PodGroup"), plural="podgroups",
    needs="the scheduling.k8s.io/v1beta1 PodGroup API (Kubernetes 1.37 with the GenericWorkload "
          "feature gate and the scheduling.k8s.io/v1beta1 API turned on)",
    group_name=lambda job, attempt: names.pod_group_name(job.name, attempt),
    pod_group_spec=pod_group_spec, join=join)
