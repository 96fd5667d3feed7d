"""scheduler-plugins' coscheduling (kubernetes-sigs/scheduler-plugins): a
`scheduling.x-k8s.io/v1alpha1` PodGroup (minMember >= 1, scheduleTimeoutSeconds) and the
`scheduling.x-k8s.io/pod-group` label (apis/scheduling/v1alpha1/types.go PodGroupLabel);
the scheduler's name is the chart's (`scheduler-plugins-scheduler` when run as a second
scheduler, doc/install.md). Its Pods carry their own words: nothing to read.
"""

from __future__ import annotations

from typing import Any

from ddpjob.api.gangs.base import GangJob, Integration, PodGroupKind, SchedulerSetting

API = "scheduling.x-k8s.io/v1alpha1"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def pod_group_spec(job: GangJob, pod: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": job.min_nodes}
    if job.scheduling.schedule_timeout_seconds:
        spec["scheduleTimeoutSeconds"] = job.scheduling.schedule_timeout_seconds
    return spec


def join(pod: dict[str, Any], job: GangJob, group: str, scheduler: str | None) -> None:
    if scheduler:
        pod["spec"]["schedulerName"] = scheduler
    pod["metadata"]["labels"][GROUP_LABEL] = group


INTEGRATION = Integration(
    name="coscheduling",
    needs="scheduler-plugins' scheduling.x-k8s.io/v1alpha1 PodGroup CRD (install scheduler-plugins)",
    pod_group=PodGroupKind(API, "PodGroup", "podgroups"),
    pod_group_spec=pod_group_spec,
    join=join,
    scheduler=SchedulerSetting("DDPJOB_COSCHEDULING_SCHEDULER", "scheduler-plugins-scheduler"),
)
