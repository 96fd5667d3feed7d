"""What the job logic needs to know about one Pod, read from a Pod body.

The local runner builds the same PodState from its processes, so the job logic never
sees where a Pod came from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ddpjob import text
from ddpjob.api import names


@dataclass(frozen=True)
class PodState:
    name: str
    node_rank: int
    restart_count: int
    phase: str  # Pending | Running | Succeeded | Failed | Unknown
    exit_code: int | None = None
    reason: str | None = None
    message: str | None = None
    finished_at: str | None = None
    deleting: bool = False
    # Held by an earlier DDPJob of the same name (another uid), awaiting garbage
    # collection: never part of this job's gang, but it holds a name the gang needs.
    leftover: bool = False
    # Placed on a node (the local runner's processes always are). When not: the reason
    # and message of the Pod's PodScheduled condition (Unschedulable, SchedulingGated).
    scheduled: bool = True
    scheduling_reason: str | None = None
    scheduling_message: str | None = None
    # Why the Pod is being taken away by someone else than the job (preemption,
    # eviction, a node drain): such a failure is not the program's and does not use up
    # spec.maxRestarts. None for an ordinary failure.
    disruption: str | None = None
    ip: str | None = None  # status.podIP: where the operator reads the Pod's /progress
    node_name: str | None = None  # spec.nodeName: where a stuck deletion's kubelet lives
    deletion_time: str | None = None  # metadata.deletionTimestamp: the end of its grace period
    uid: str | None = None
    # False for a Running Pod whose Ready condition is False: with no readiness probe of
    # ours, its node stopped reporting (the node lifecycle controller marks its Pods so).
    ready: bool = True


def attempt_pods(pods: Iterable[PodState], restarts: int, nodes: int) -> dict[int, PodState]:
    """The gang attempt `restarts`' own Pods (this job's, within `nodes`), by node rank."""
    return {p.node_rank: p for p in pods if not p.leftover and p.restart_count == restarts and p.node_rank < nodes}


def _trainer_status(status: Mapping[str, Any]) -> Mapping[str, Any]:
    statuses = [cs for cs in status.get("containerStatuses") or [] if isinstance(cs, Mapping)]
    for cs in statuses:
        if cs.get("name") == names.TRAINER_CONTAINER:
            return cs
    return statuses[0] if statuses else {}


def pod_state(pod: Mapping[str, Any]) -> PodState | None:
    """None for a Pod without the job's labels (not ours to judge)."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    try:
        rank = int(labels[names.LABEL_NODE_RANK])
        restart = int(labels[names.LABEL_RESTART_COUNT])
    except (KeyError, TypeError, ValueError):
        return None
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    terminated = (_trainer_status(status).get("state") or {}).get("terminated") or {}
    exit_code = terminated.get("exitCode")
    disruption = _disruption(status)
    # A Pod-level reason (Evicted, Preempted, NodeLost) says more than the container's, and
    # so does a disruption mark: a container killed because its Pod was evicted or
    # preempted ends with exit 143 and reason Error, which says nothing of why.
    reason = status.get("reason") or (disruption and disruption[0]) or terminated.get("reason")
    # The Pod's own words (its termination message): untrusted, escaped and bounded.
    message = status.get("message") or (disruption and disruption[1]) or terminated.get("message")
    message = text.clean(message) if message else message
    scheduled, sched_reason, sched_message = _scheduling(pod.get("spec") or {}, status, phase)
    return PodState(
        name=meta.get("name", ""),
        node_rank=rank,
        restart_count=restart,
        phase=phase,
        exit_code=int(exit_code) if exit_code is not None else None,
        reason=reason,
        message=message,
        finished_at=terminated.get("finishedAt"),
        deleting=bool(meta.get("deletionTimestamp")),
        scheduled=scheduled,
        scheduling_reason=sched_reason,
        scheduling_message=sched_message,
        disruption=disruption[0] if disruption else None,
        ip=status.get("podIP") or None,
        node_name=(pod.get("spec") or {}).get("nodeName"),
        deletion_time=meta.get("deletionTimestamp"),
        uid=meta.get("uid"),
        ready=not (phase == "Running" and (_conditions(status).get("Ready") or {}).get("status") == "False"),
    )


def _conditions(status: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {
        c["type"]: c
        for c in status.get("conditions") or []
        if isinstance(c, Mapping) and isinstance(c.get("type"), str)
    }


def _scheduling(spec: Mapping[str, Any], status: Mapping[str, Any], phase: str) -> tuple[bool, str | None, str | None]:
    cond = _conditions(status).get("PodScheduled")
    if phase != "Pending" or spec.get("nodeName") or (cond and cond.get("status") == "True"):
        return True, None, None
    gates = [str(g.get("name")) for g in spec.get("schedulingGates") or [] if isinstance(g, Mapping)]
    if cond:
        return False, cond.get("reason"), cond.get("message")
    if gates:
        # What the API server writes for a gated Pod (pkg/registry/core/pod/strategy.go).
        return False, "SchedulingGated", f"Scheduling is blocked due to non-empty scheduling gates: {', '.join(gates)}"
    # A gang scheduler may hold a Pod with no condition at all (native PreEnqueue, coscheduling).
    return False, "Pending", "not yet scheduled"


# Pod conditions a disruption leaves before the Pod goes:
# - DisruptionTarget (core, https://kubernetes.io/docs/concepts/workloads/pods/disruptions/#pod-disruption-conditions):
#   PreemptionByScheduler, DeletionByTaintManager, EvictionByEvictionAPI, DeletionByPodGC, TerminationByKubelet;
# - TerminationTarget: Kueue's, set before it deletes a preempted group's Pods (pkg/controller/jobs/pod Stop()).
_DISRUPTION_CONDITIONS = ("DisruptionTarget", "TerminationTarget")
# status.reason of a Pod the kubelet evicted (node pressure) or preempted for a critical Pod.
_DISRUPTION_REASONS = ("Evicted", "Preempting")


def is_disrupted(status: Mapping[str, Any]) -> bool:
    """Whether a Pod's status carries a disruption mark (cheaper than `pod_state`)."""
    return (bool(status.get("conditions")) or status.get("reason") in _DISRUPTION_REASONS) and _disruption(
        status
    ) is not None


def _disruption(status: Mapping[str, Any]) -> tuple[str, str | None] | None:
    conds = _conditions(status)
    for ctype in _DISRUPTION_CONDITIONS:
        cond = conds.get(ctype)
        if cond and cond.get("status") == "True":
            return cond.get("reason") or ctype, cond.get("message")
    ready = conds.get("Ready")
    # Volcano's evictor (pkg/scheduler/cache defaultEvictor.Evict) marks Ready=False,
    # reason Evict, then deletes the Pod; it sets no DisruptionTarget.
    if ready and ready.get("status") == "False" and ready.get("reason") == "Evict":
        return "Evict", ready.get("message")
    if status.get("reason") in _DISRUPTION_REASONS:
        return status["reason"], status.get("message")
    return None
