"""The job logic, pure: from one observation (`decision.Observed`: the job, its Pods, its
last status, and what the operator knows besides) decide the whole new status, the Events
and what to do next (`decision.Plan`). The operator and `ddpjob run` both call it; neither
decides anything on its own.

Each decision is one policy, in its own file, asked in this order; the first that
applies decides:

    invalid_spec   the spec is refused: Failed (InvalidSpec)
    deadline       a finished job stays finished (TTL deletes it); activeDeadlineSeconds
    suspend        spec.suspend: Pods deleted, Suspended
    elastic        a running elastic job lost a Pod or changed size: keep the survivors
    failure        a failed, vanished or stalled (stall.py) member: restart or fail
    success        every node exited 0
    creation       names held by earlier Pods; the restart backoff (failure); all running
    scheduling     onScheduleTimeout: Fail
    creation       create the missing Pods, unless the gang integration (scheduling) or a
                   refused create's backoff holds them

then `_settle` adds what every step does: the job's first status says its notices
(creation.first_notices), the PodsCreated condition flips back after a refusal, an
elastic job's resize is counted and said (elastic.settle) and its survivors are told
whom it lost (survivor_notices.py), a write that only moves counts waits
(count_writes.py), a phase change asks for another step at once (`plan_again`), and
Events name the failed Pod.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from ddpjob import text
from ddpjob.api.spec import DDPJob
from ddpjob.job import (
    count_writes,
    creation,
    deadline,
    elastic,
    failure,
    gang_wait,
    invalid_spec,
    scheduling,
    stall,
    success,
    survivor_notices,
    suspend,
)
from ddpjob.job.conditions import build_conditions
from ddpjob.job.decision import (
    FAILED,
    FINISHED,
    PENDING,
    RESTARTING,
    RUNNING,
    SUCCEEDED,
    SUSPENDED,
    Event,
    Observed,
    Plan,
)
from ddpjob.job.invalid_spec import invalid_status
from ddpjob.job.observe import PodState
from ddpjob.job.step import Step, resolved, stopped_counts
from ddpjob.times import format_time, parse_time

__all__ = [
    "FAILED",
    "FINISHED",
    "PENDING",
    "RESTARTING",
    "RUNNING",
    "SUCCEEDED",
    "SUSPENDED",
    "Event",
    "Observed",
    "Plan",
    "decide",
    "format_time",
    "interrupted",
    "invalid_status",
    "parse_time",
    "plan",
    "resolved",
]

INTERRUPTED = "interrupted by the user"


def decide(observed: Observed) -> Plan:
    """The whole next step of one job."""
    if observed.errors or observed.job is None:
        return _bounded(_ended_groups(observed, invalid_spec.plan(observed)))
    step = Step(observed, gang_wait.of(observed))
    decided = (
        deadline.finished(step)
        or suspend.plan(step)
        or deadline.exceeded(step)
        or elastic.plan(step)
        or failure.plan(step)
        or success.plan(step)
        or creation.held(step)
        or failure.backing_off(step)
        or creation.running(step)
        or scheduling.timed_out(step)
        or creation.start(step)
    )
    return _bounded(_ended_groups(observed, _settle(step, decided)))


def _ended_groups(observed: Observed, plan: Plan) -> Plan:
    """A plan that writes its status also deletes the PodGroups of attempts that ended (a
    plan that creates leaves it to the next step, which writes)."""
    if not plan.write_status or plan.delete_job or not observed.pod_groups:
        return plan
    return replace(plan, delete_pod_groups=scheduling.ended_pod_groups(observed, plan.status))


def _bounded(plan: Plan) -> Plan:
    """Every message in the status and the Events escaped and bounded (text.clean): they
    carry words from outside (termination messages, API errors, progress), and the CRD
    refuses a status whose messages are longer (its maxLength), which would stop every
    later write of the job. Idempotent, so a stored status plans to itself."""
    st = dict(plan.status)
    if isinstance(st.get("message"), str):
        st["message"] = text.clean(st["message"])
    if isinstance(st.get("conditions"), list):
        st["conditions"] = [
            {**c, "message": text.clean(c["message"])}
            if isinstance(c, dict) and isinstance(c.get("message"), str)
            else c
            for c in st["conditions"]
        ]
    failure = st.get("lastFailure")
    if isinstance(failure, dict) and isinstance(failure.get("message"), str):
        st["lastFailure"] = {**failure, "message": text.clean(failure["message"])}
    events = tuple(dataclasses.replace(e, message=text.clean(e.message, 1024)) for e in plan.events)
    return dataclasses.replace(plan, status=st, events=events)


def plan(
    job: DDPJob,
    pods: list[PodState],
    previous: Mapping[str, Any] | None,
    now: datetime,
    progress: stall.ProgressState | None = None,
) -> Plan:
    """`decide` for a caller that knows only the job, its Pods, its status and its progress
    (`ddpjob run`, and most tests)."""
    return decide(Observed(job=job, pods=tuple(pods), previous=dict(previous or {}), now=now, progress=progress))


def interrupted(status: Mapping[str, Any], nodes: int, now: datetime) -> dict[str, Any]:
    """The status of a run its user stopped (`ddpjob run`'s Ctrl-C): Failed, its conditions
    following the phase as every other step's do (Failed=True, Running=False), and no Pod
    running (NODES 0/nodes)."""
    now_s = format_time(now)
    return {
        **stopped_counts(status, nodes),
        "phase": FAILED,
        "message": INTERRUPTED,
        "completionTime": now_s,
        "conditions": build_conditions(status.get("conditions"), FAILED, "Interrupted", INTERRUPTED, now_s),
    }


def _settle(step: Step, plan: Plan) -> Plan:
    prev, observed = step.prev, step.observed
    if plan.gang_blocked:  # the gang's own wait: no Pods were asked for, nothing else to say
        return replace(plan, events=creation.first_notices(step) + plan.events)
    status = plan.status
    if not plan.keep_refusal:
        status = creation.created_status(status, step.now_s)
    plan = survivor_notices.annotate(step, elastic.settle(step, replace(plan, status=status)))
    status, requeue = plan.status, plan.requeue_after
    if plan.write_status and not (plan.delete or plan.delete_job):
        held = count_writes.held(prev, status, step.job.nodes, observed.since_last_write)
        if held:  # only counts moved, and the last write was just now: batch them
            status, requeue = prev, step.earliest(held, requeue)
    # The plan is a function of the previous status: after a phase change, plan again
    # until nothing changes (a job that just finished learns its TTL timer). A refused
    # create waits out its backoff instead.
    again = status.get("phase") != step.prev_phase and not plan.keep_refusal
    events = creation.first_notices(step) + plan.events
    return replace(plan, status=status, requeue_after=requeue, plan_again=again, events=_with_failure(events, status))


def _with_failure(events: tuple[Event, ...], status: Mapping[str, Any]) -> tuple[Event, ...]:
    """Restarting and Failed Events name the failed Pod and its exit code, always, even when
    the Pod's own message (an eviction notice, say) replaced the default wording."""
    failure_ = status.get("lastFailure") or {}
    if not failure_.get("pod"):
        return events
    out = []
    for event in events:
        message = event.message
        if event.reason in ("Restarting", "Failed"):
            code = failure_.get("exitCode", "none")
            if failure_["pod"] not in message or f"exit code {code}" not in message:
                message = f"{message} (pod {failure_['pod']}, exit code {code})"
        out.append(replace(event, message=message))
    return tuple(out)
