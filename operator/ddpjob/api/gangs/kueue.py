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

Why a queued gang waits, in its queue's words: the Pods wait at Kueue's gate, whose
PodScheduled condition says only "Scheduling is blocked due to non-empty scheduling
gates"; the reason a user needs (quota used up, a LocalQueue that does not exist, a
ClusterQueue that is stopped) is on the Workload: its `QuotaReserved=False` condition
(e.g. `couldn't assign flavors to pod set main: insufficient unused quota for
nvidia.com/gpu in flavor gpu, 2 more needed`), or `Admitted=False` once quota is reserved
and admission checks are pending. While the Pods are gated, the Workload is read (one GET
of `kueue.x-k8s.io/v1beta2` workloads/<group>; a 404 before Kueue made it leaves the
gate's words) and its words replace the gate's, with reason `Queued`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ddpjob.api.gangs.base import GangJob, Integration, Objects, Reads
from ddpjob.backoff import Backoff

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
TOTAL_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
RETRIABLE_ANNOTATION = "kueue.x-k8s.io/retriable-in-group"
WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2"
GATED = "SchedulingGated"  # the PodScheduled reason of a gated Pod (the API server's)
REASON = "Queued"  # GangScheduled's reason while the queue holds the gang


def join(pod: dict[str, Any], job: GangJob, group: str, scheduler: str | None) -> None:
    labels = pod["metadata"]["labels"]
    labels[QUEUE_LABEL] = job.scheduling.queue
    labels[GROUP_LABEL] = group
    annotations = pod["metadata"].setdefault("annotations", {})
    annotations[TOTAL_ANNOTATION] = str(job.nodes)
    annotations[RETRIABLE_ANNOTATION] = "false"


def workload_path(namespace: str, name: str) -> str:
    return f"{WORKLOADS}/namespaces/{namespace}/workloads/{name}"


def next_read(namespace: str, group: str, read: Objects) -> str | None:
    """Kueue names a Pod group's Workload after the group."""
    return None if read else workload_path(namespace, group)


def waiting_reason(workload: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """(reason, message) while Kueue holds the Workload; None once it is admitted or
    finished, or when Kueue has not yet said anything (the gate's own words stay)."""
    if not workload:
        return None
    conds = {c.get("type"): c for c in (workload.get("status") or {}).get("conditions") or [] if isinstance(c, Mapping)}
    if (conds.get("Finished") or {}).get("status") == "True":
        return None
    queue = (workload.get("spec") or {}).get("queueName") or "?"
    for ctype in ("QuotaReserved", "Admitted"):
        cond = conds.get(ctype)
        if cond is None or cond.get("status") != "False":
            continue  # quota reserved: Admitted decides
        said = cond.get("message") or f"{ctype}=False ({cond.get('reason') or 'no reason given'})"
        return REASON, f"Kueue queue {queue}: {said}"
    return None


INTEGRATION = Integration(
    name="kueue",
    needs="Kueue",
    join=join,
    queue="LocalQueue",
    queue_required=True,
    reads=Reads(
        held=GATED,
        next=next_read,
        verdict=lambda read: waiting_reason(read[0] if read else None),
        recheck=Backoff(base=2.0, cap=30.0),
        replaces=True,
    ),
)
