"""scheduler-plugins' coscheduling (kubernetes-sigs/scheduler-plugins): a
`scheduling.x-k8s.io/v1alpha1` PodGroup (minMember >= 1, scheduleTimeoutSeconds) and the
`scheduling.x-k8s.io/pod-group` label (apis/scheduling/v1alpha1/types.go PodGroupLabel);
the scheduler's name is the chart's (`scheduler-plugins-scheduler` when run as a second
scheduler, doc/install.md).
"""
from __future__ import annotations

from typing import Any

from ddpjob.api import names
from ddpjob.api.spec import DDPJob
from ddpjob.render.gangs.base import GangOptions, Integration

API = "scheduling.x-k8s.io/v1alpha1"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def pod_group_spec(job: DDPJob, pod: dict) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": job.min_nodes}
    if job.scheduling.schedule_timeout_seconds:
        spec["scheduleTimeoutSeconds"] = job.scheduling.schedule_timeout_seconds
    return spec


def join(pod: dict, job: DDPJob, group: str, options: GangOptions) -> None:
    pod["spec"]["schedulerName"] = options.coscheduling_scheduler
    pod["metadata"]["labels"][GROUP_LABEL] = group


INTEGRATION = Integration(
    name="coscheduling", pod_group=(API, "PodGroup"), plural="podgroups",
    needs="scheduler-plugins' scheduling.x-k8s.io/v1alpha1 PodGroup CRD (install scheduler-plugins)",
    group_name=lambda job, attempt: names.pod_group_name(job.name, attempt),
    pod_group_spec=pod_group_spec, join=join)
