"""Waiting to be placed, observed: how many Pods of the gang are scheduled and what the
GangScheduled condition says, computed once per step before the step is built
(`lifecycle.decide`), so that every policy reads the same wait and the scheduling policy
(scheduling.py) is one policy like the others.

Waiting is never a failure: an unscheduled or gated Pod is reported with the scheduler's own
reason and message (its PodScheduled condition), e.g.
`Scheduled 6/8: 0/6 nodes are available: 6 Insufficient nvidia.com/gpu.`. What the gang's
integration says of Pods it holds (`decision.GangSaid`, read from its own objects) goes
with them: in place of a gate's words, which say only that it is closed, or before a
scheduler's, which say what it found.

The wait is timed from the GangScheduled condition's lastTransitionTime: it flips to False
when an attempt's Pods exist and not all of them are placed, and to True once they all are,
so each attempt's wait is timed on its own and survives operator restarts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ddpjob.api.spec import DDPJob
from ddpjob.job.conditions import find, set_condition, transition_time
from ddpjob.job.decision import GangSaid, Observed
from ddpjob.job.observe import PodState, attempt_pods
from ddpjob.times import format_time, parse_time

CONDITION = "GangScheduled"
TIMEOUT_REASON = "ScheduleTimeout"
# Not yet placed, but no scheduler has said why (the moments before a binding).
_NO_VERDICT = ("Pending", "PodsNotCreated")


@dataclass(frozen=True)
class GangWait:
    scheduled: int
    # (status, reason, message) of GangScheduled; None: no Pods of this attempt yet, or no
    # verdict worth a condition: what was there stays.
    said: tuple[str, str, str] | None
    timed_out: bool = False
    newly_timed_out: bool = False  # this step is the one that saw the timeout pass
    timeout_in: float | None = None  # seconds until the timeout is due

    @property
    def waiting(self) -> bool:
        return self.said is not None and self.said[0] == "False"

    @property
    def message(self) -> str:
        return self.said[2] if self.said is not None else ""

    def conditions(self, conditions: Sequence[Mapping[str, Any]], now_s: str) -> list[dict[str, Any]]:
        """`conditions` with GangScheduled set from this wait (kept as it was without one)."""
        if self.said is None:
            return [dict(c) for c in conditions]
        return set_condition(conditions, CONDITION, *self.said, now_s)


def _verdict(job: DDPJob, pods: list[PodState], said: GangSaid | None) -> tuple[str, str, str]:
    scheduled = sum(1 for p in pods if p.scheduled)
    if scheduled == job.nodes:
        return "True", "AllPodsScheduled", f"Scheduled {job.nodes}/{job.nodes}"
    waiting = sorted((p for p in pods if not p.scheduled), key=lambda p: p.node_rank)
    first = waiting[0] if waiting else None
    reason = (first.scheduling_reason if first else None) or "PodsNotCreated"
    why = (first.scheduling_message if first else None) or f"{job.nodes - len(pods)} Pod(s) not created yet"
    if said is not None and first is not None and first.scheduling_reason == said.held:
        why = said.words if said.replaces else f"{said.words}; {why}"
        reason = said.reason or reason
    return "False", reason, f"Scheduled {scheduled}/{job.nodes}: {why}"


def observe(
    job: DDPJob,
    current: Mapping[int, PodState],
    previous: Sequence[Mapping[str, Any]] | None,
    now: datetime,
    now_s: str,
    said: GangSaid | None = None,
) -> GangWait:
    """`current`: the attempt's Pods by node rank (deleting ones are not placed for long);
    `said`: what the gang's integration says of Pods it holds, which the Pods' own words
    may not (a Volcano queue's verdict, a Kueue Workload's reason)."""
    pods = [p for p in current.values() if not p.deleting]
    scheduled = sum(1 for p in pods if p.scheduled)
    if not pods:
        return GangWait(scheduled, None)
    status, reason, message = _verdict(job, pods, said)
    old = find(previous, CONDITION)
    since = transition_time(previous, CONDITION, status, now_s)
    timeout = job.scheduling.schedule_timeout_seconds
    timed_out = newly = False
    timeout_in = None
    if status == "False" and timeout:
        waited = (now - (parse_time(since) or now)).total_seconds()
        if waited >= timeout:
            timed_out = True
            newly = old is None or old.get("status") != status or old.get("reason") != TIMEOUT_REASON
            reason = TIMEOUT_REASON
            message = f"not placed within scheduleTimeoutSeconds={timeout}: {message}"
        else:
            timeout_in = timeout - waited
    if job.scheduling.gang == "none" and old is None and (status == "True" or reason in _NO_VERDICT):
        # Without a gang scheduler the condition appears once the scheduler said a Pod
        # must wait (Unschedulable, SchedulingGated), not for the moment before binding.
        return GangWait(scheduled, None)
    return GangWait(scheduled, (status, reason, message), timed_out, newly, timeout_in)


def of(observed: Observed) -> GangWait:
    """The wait of the observed job's current attempt (its job parsed)."""
    job = observed.job
    assert job is not None  # an unparsed spec is invalid_spec's, before any wait
    previous = observed.previous or {}
    current = attempt_pods(observed.pods, int(previous.get("restarts", 0)), job.nodes)
    said = observed.gang_said
    return observe(job, current, previous.get("conditions"), observed.now, format_time(observed.now), said)
