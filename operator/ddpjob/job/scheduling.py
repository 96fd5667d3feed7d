"""Scheduling policy: what a gang's wait to be placed (gang_wait.py, observed before the
step) decides. Waiting is reported, never failed, unless the user set
`onScheduleTimeout: Fail` (`timed_out`); a gang whose integration is off or not
installed, or whose PodGroup is still going away, waits with backoff (`blocked`); the
PodGroups of attempts that ended are deleted (`ended_pod_groups`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ddpjob.api import gangs
from ddpjob.backoff import Backoff
from ddpjob.job.conditions import set_condition
from ddpjob.job.decision import FAILED, PENDING, RESTARTING, RUNNING, Event, Observed, Plan
from ddpjob.job.gang_wait import CONDITION, TIMEOUT_REASON

if TYPE_CHECKING:
    from ddpjob.job.step import Step

__all__ = [
    "BLOCKED_BACKOFF",
    "CONDITION",
    "RECHECK_EVERY",
    "TIMEOUT_REASON",
    "UNAVAILABLE",
    "blocked",
    "blocked_status",
    "ended_pod_groups",
    "timed_out",
]

# The gang's integration is off in this operator, or its PodGroup API is not served.
UNAVAILABLE = "GangIntegrationUnavailable"
# A blocked gang is looked at again after 2 s, 4 s, ... at most 5 minutes; the PodGroup
# API is asked for again on the 1st, 5th, 9th ... wait (installing the CRD is enough).
BLOCKED_BACKOFF = Backoff(base=2.0, cap=300.0)
RECHECK_EVERY = 4


def timed_out(step: Step) -> Plan | None:
    """`onScheduleTimeout: Fail` and the gang was not placed in time: the job fails."""
    wait = step.gang_wait
    if not (wait.timed_out and step.job.scheduling.on_schedule_timeout == "Fail"):
        return None
    return Plan(
        status=step.status(FAILED, TIMEOUT_REASON, wait.message, completionTime=step.now_s),
        delete=step.live,
        requeue_after=step.ttl_in,
        events=step.on_entry(FAILED, "Warning", "Failed", wait.message),
    )


def blocked_status(status: Mapping[str, Any], reason: str, message: str, now_s: str) -> dict[str, Any]:
    """The status of a job whose Pods cannot be made yet: waiting, with the reason."""
    return {
        **status,
        "message": message,
        "conditions": set_condition(status.get("conditions"), CONDITION, "False", reason, message, now_s),
    }


def blocked(step: Step, starting: Plan) -> Plan:
    """The gang's Pods must not be created yet (its integration is off or not installed, or
    its PodGroup is still going away): wait with backoff, say why once (and as an Event)."""
    observed = step.observed
    reason, message = observed.gang_blocked or ("", "")
    waits = observed.gang_waits + 1
    status = blocked_status(starting.status, reason, message, step.now_s)
    events = (Event("Warning", reason, message),) if step.prev.get("message") != status["message"] else ()
    return Plan(
        status=status,
        events=events,
        gang_blocked=True,
        requeue_after=BLOCKED_BACKOFF.delay(waits, observed.jitter),
        check_gang_apis=reason == UNAVAILABLE and waits % RECHECK_EVERY == 1,
    )


def ended_pod_groups(observed: Observed, status: Mapping[str, Any]) -> tuple[str, ...]:
    """The PodGroups to delete once `status` is written: every one but the current
    attempt's (named by the job's integration) while the job is live. Volcano reserves
    queue capacity for a PodGroup, and a finished native or coscheduling one is never
    placed again; a native PodGroup goes once its Pods have ended (its protection
    finalizer)."""
    job, keep = observed.job, None
    integration = gangs.get(job.scheduling.gang) if job is not None else None
    if job is not None and integration is not None and status.get("phase") in (PENDING, RUNNING, RESTARTING):
        keep = integration.group_name(job, int(status.get("restarts", 0)))
    return tuple(name for name in observed.pod_groups if name != keep)
