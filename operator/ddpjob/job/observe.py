"""What the job logic needs to know about one Pod, read from a Pod body.

The local runner builds the same PodState from its processes, so the job logic never
sees where a Pod came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

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
    node_name: str | None = None  # spec.nodeName: where a stuck deletion's kubelet lives
    deletion_time: str | None = None  # metadata.deletionTimestamp: the end of its grace period
    uid: str | None = None


def _trainer_status(status: Mapping[str, Any]) -> Mapping[str, Any]:
    for cs in status.get("containerStatuses") or []:
        if cs.get("name") == names.TRAINER_CONTAINER:
            return cs
    statuses = status.get("containerStatuses") or []
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
    # A Pod-level reason (Evicted, Preempted, NodeLost) says more than the container's.
    reason = status.get("reason") or terminated.get("reason")
    message = status.get("message") or terminated.get("message")
    return PodState(
        name=meta.get("name", ""), node_rank=rank, restart_count=restart, phase=phase,
        exit_code=int(exit_code) if exit_code is not None else None, reason=reason, message=message,
        finished_at=terminated.get("finishedAt"), deleting=bool(meta.get("deletionTimestamp")),
        node_name=(pod.get("spec") or {}).get("nodeName"), deletion_time=meta.get("deletionTimestamp"),
        uid=meta.get("uid"),
    )
