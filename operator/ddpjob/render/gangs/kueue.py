"""Kueue's plain-Pod integration: no object of ours.

Kueue groups Pods by the `kueue.x-k8s.io/pod-group-name` label, admits the group through
the LocalQueue named by `kueue.x-k8s.io/queue-name` once
`kueue.x-k8s.io/pod-group-total-count` Pods exist
(https://kueue.sigs.k8s.io/docs/tasks/run/plain_pods/), and makes a Workload of the same
name. Its webhook adds the `kueue.x-k8s.io/admission` scheduling gate and the
`kueue.x-k8s.io/managed` finalizer itself; we add neither.

One group (and so one Workload) per gang attempt, `<job>-attempt-<n>` as the PodGroup
integrations name theirs, each marked `kueue.x-k8s.io/retriable-in-group: "false"`.
Measured on Kueue v0.17.0 (tests/system/test_kueue_real.py): Kueue removes its finalizer
from a retriable group's failed or deleted Pods only when replacements arrive
(pkg/controller/jobs/pod: "finalizeable" = inactive + active - count), and counts the
group finished only when every Pod succeeded. A DDPJob deleted while waiting, or failed by
its schedule timeout, leaves no replacements: its Pods stayed Terminating with Kueue's
finalizer and the Workload stayed holding its place in the queue. An unretriable group
whose Pods are all gone is finished and finalized, and its Workload goes with its Pods.
So a gang restart (a failure, or a preemption: Kueue evicts the Workload and deletes its
Pods) is a new Workload queued afresh, as a new attempt's PodGroup is for the other
integrations. Every attempt has the same admission-relevant shape (Kueue's role hash:
resources, ports, node selector, tolerations, affinity, priority).
"""
from __future__ import annotations

from ddpjob.api import names
from ddpjob.api.spec import DDPJob
from ddpjob.render.gangs.base import GangOptions, Integration

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
TOTAL_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
RETRIABLE_ANNOTATION = "kueue.x-k8s.io/retriable-in-group"


def join(pod: dict, job: DDPJob, group: str, options: GangOptions) -> None:
    labels = pod["metadata"]["labels"]
    labels[QUEUE_LABEL] = job.scheduling.queue
    labels[GROUP_LABEL] = group
    annotations = pod["metadata"].setdefault("annotations", {})
    annotations[TOTAL_ANNOTATION] = str(job.nodes)
    annotations[RETRIABLE_ANNOTATION] = "false"


INTEGRATION = Integration(
    name="kueue", pod_group=None, plural=None, needs="Kueue",
    group_name=lambda job, attempt: names.pod_group_name(job.name, attempt), pod_group_spec=None, join=join)
