"""Kueue's plain-Pod integration: no object of ours.

Kueue groups Pods by the `kueue.x-k8s.io/pod-group-name` label, admits the group through
the LocalQueue named by `kueue.x-k8s.io/queue-name` once
`kueue.x-k8s.io/pod-group-total-count` Pods exist
(https://kueue.sigs.k8s.io/docs/tasks/run/plain_pods/), and makes a Workload of the same
name. Its webhook adds the `kueue.x-k8s.io/admission` scheduling gate and the
`kueue.x-k8s.io/managed` finalizer itself; we add neither. "Kueue does not re-create failed
Pods ... It is the responsibility of the ... controller that created the original Pods to
create replacement Pods": replacements carrying the same group label rejoin the Workload
(which keeps its admission), and Kueue finalizes the failed Pods they replace. So the group
name is the job's name for every attempt, and a gang restart is exactly such a replacement.
Replacements must have the same admission-relevant shape (Kueue's role hash covers the
containers' resources and ports, node selector, tolerations, affinity, priority), which
every attempt of a job has; env and names differ per rank and are not part of it. We do not
set `kueue.x-k8s.io/retriable-in-group: "false"`: a preempted gang must stay retriable;
the Workload is owned by the Pods and goes with them when the DDPJob is deleted.
"""
from __future__ import annotations

from ddpjob.api.spec import DDPJob
from ddpjob.render.gangs.base import GangOptions, Integration

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
TOTAL_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"


def join(pod: dict, job: DDPJob, group: str, options: GangOptions) -> None:
    labels = pod["metadata"]["labels"]
    labels[QUEUE_LABEL] = job.scheduling.queue
    labels[GROUP_LABEL] = group
    pod["metadata"].setdefault("annotations", {})[TOTAL_ANNOTATION] = str(job.nodes)


INTEGRATION = Integration(
    name="kueue", pod_group=None, plural=None, needs="Kueue",
    group_name=lambda job, attempt: job.name, pod_group_spec=None, join=join)
