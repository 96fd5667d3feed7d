"""Waiting to be placed, pure: how many Pods of the gang are scheduled, the GangScheduled
condition, and whether spec.scheduling.scheduleTimeoutSeconds has passed.

Waiting is never a failure: an unscheduled or gated Pod is reported with the scheduler's own
reason and message (its PodScheduled condition), e.g.
`Scheduled 6/8: 0/6 nodes are available: 6 Insufficient nvidia.com/gpu.`. Only a user who
set `onScheduleTimeout: Fail` turns a long wait into a failed job.

The wait is timed from the GangScheduled condition's lastTransitionTime: it flips to False
when an attempt's Pods exist and not all of them are placed, and to True once they all are,
so each attempt's wait is timed on its own and survives operator restarts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Mapping

from ddpjob.api.spec import DDPJob
from ddpjob.backoff import Backoff
from ddpjob.job.decision import FAILED, Event, GangSaid, Plan
from ddpjob.job.observe import PodState
from ddpjob.job.queue_wait import gated_by_queue
from ddpjob.times import parse_time

if TYPE_CHECKING:
    from ddpjob.job.step import Step

CONDITION = "GangScheduled"
TIMEOUT_REASON = "ScheduleTimeout"
# The gang's integration is off in this operator, or its PodGroup API is not served.
UNAVAILABLE = "GangIntegrationUnavailable"
# A blocked gang is looked at again after 2 s, 4 s, ... at most 5 minutes; the PodGroup
# API is asked for again on the 1st, 5th, 9th ... wait (installing the CRD is enough).
BLOCKED_BACKOFF = Backoff(base=2.0, cap=300.0)
RECHECK_EVERY = 4
# Not yet placed, but no scheduler has said why (the moments before a binding).
_NO_VERDICT = ("Pending", "PodsNotCreated")


@dataclass(frozen=True)
class GangWait:
    scheduled: int
    condition: dict[str, Any] | None  # None: no Pods of this attempt yet, keep what was there
    timed_out: bool = False
    newly_timed_out: bool = False  # this step is the one that saw the timeout pass
    timeout_in: float | None = None  # seconds until the timeout is due

    @property
    def waiting(self) -> bool:
        return self.condition is not None and self.condition["status"] == "False"

    @property
    def message(self) -> str:
        return (self.condition or {}).get("message", "")


def observe(job: DDPJob, current: Mapping[int, PodState], previous: list[Mapping[str, Any]] | None,
            now: datetime, now_s: str, said: GangSaid | None = None) -> GangWait:
    """`current`: the attempt's Pods by node rank (deleting ones are not placed for long);
    `said`: what the gang's scheduler or queue says of Pods it holds, which the Pods' own
    words may not (a Volcano queue's verdict, a Kueue Workload's reason)."""
    old = next((c for c in previous or [] if c.get("type") == CONDITION), None)
    pods = [p for p in current.values() if not p.deleting]
    scheduled = sum(1 for p in pods if p.scheduled)
    if not pods:
        return GangWait(scheduled, None)
    if scheduled == job.nodes:
        status, reason, message = "True", "AllPodsScheduled", f"Scheduled {job.nodes}/{job.nodes}"
    else:
        waiting = sorted((p for p in pods if not p.scheduled), key=lambda p: p.node_rank)
        first = waiting[0] if waiting else None
        reason = (first.scheduling_reason if first else None) or "PodsNotCreated"
        why = (first.scheduling_message if first else None) or f"{job.nodes - len(pods)} Pod(s) not created yet"
        if said is not None and first is not None and first.scheduling_reason == said.held:
            # A gate's words say only that the gate is closed: the holder's replace them. A
            # scheduler's say what it found: the holder's go first.
            why = said.words if gated_by_queue(said.held) else f"{said.words}; {why}"
            reason = said.reason or reason
        status, message = "False", f"Scheduled {scheduled}/{job.nodes}: {why}"
    changed = old is None or old.get("status") != status
    since = now_s if changed else old.get("lastTransitionTime", now_s)
    timeout = job.scheduling.schedule_timeout_seconds
    timed_out = newly = False
    timeout_in = None
    if status == "False" and timeout:
        waited = (now - (parse_time(since) or now)).total_seconds()
        if waited >= timeout:
            timed_out = True
            newly = (old or {}).get("reason") != TIMEOUT_REASON or changed
            reason = TIMEOUT_REASON
            message = f"not placed within scheduleTimeoutSeconds={timeout}: {message}"
        else:
            timeout_in = timeout - waited
    cond = {"type": CONDITION, "status": status, "reason": reason, "message": message, "lastTransitionTime": since}
    if job.scheduling.gang == "none" and old is None and (status == "True" or reason in _NO_VERDICT):
        # Without a gang scheduler the condition appears once the scheduler said a Pod
        # must wait (Unschedulable, SchedulingGated), not for the moment before binding.
        cond = None
    return GangWait(scheduled, cond, timed_out, newly, timeout_in)


def with_condition(conditions: list[dict[str, Any]], previous: list[Mapping[str, Any]] | None,
                   wait: GangWait) -> list[dict[str, Any]]:
    """The phase conditions plus GangScheduled (the new one, else the previous one kept)."""
    cond = wait.condition or next((dict(c) for c in previous or [] if c.get("type") == CONDITION), None)
    # build_conditions keeps other types as they were: replace the kept GangScheduled.
    others = [c for c in conditions if c.get("type") != CONDITION]
    return others + ([cond] if cond else [])


def timed_out(step: "Step") -> Plan | None:
    """`onScheduleTimeout: Fail` and the gang was not placed in time: the job fails."""
    wait = step.gang_wait
    if not (wait.timed_out and step.job.scheduling.on_schedule_timeout == "Fail"):
        return None
    return Plan(status=step.status(FAILED, TIMEOUT_REASON, wait.message, completionTime=step.now_s),
                delete=step.live, requeue_after=step.ttl_in,
                events=step.on_entry(FAILED, "Warning", "Failed", wait.message))


def blocked_status(status: Mapping[str, Any], reason: str, message: str, now_s: str) -> dict[str, Any]:
    """The status of a job whose Pods cannot be made yet: waiting, with the reason."""
    old = next((c for c in status.get("conditions", []) if c.get("type") == CONDITION), None)
    since = old["lastTransitionTime"] if old and old.get("status") == "False" else now_s
    cond = {"type": CONDITION, "status": "False", "reason": reason, "message": message, "lastTransitionTime": since}
    others = [c for c in status.get("conditions", []) if c.get("type") != CONDITION]
    return {**status, "message": message, "conditions": others + [cond]}


def blocked(step: "Step", starting: Plan) -> Plan:
    """The gang's Pods must not be created yet (its integration is off or not installed, or
    its PodGroup is still going away): wait with backoff, say why once (and as an Event)."""
    observed = step.observed
    reason, message = observed.gang_blocked or ("", "")
    waits = observed.gang_waits + 1
    status = blocked_status(starting.status, reason, message, step.now_s)
    events = (Event("Warning", reason, message),) if step.prev.get("message") != status["message"] else ()
    return Plan(status=status, events=events, gang_blocked=True,
                requeue_after=BLOCKED_BACKOFF.delay(waits, observed.jitter),
                check_gang_apis=reason == UNAVAILABLE and waits % RECHECK_EVERY == 1)
