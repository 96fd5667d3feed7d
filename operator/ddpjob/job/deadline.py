"""Deadline and TTL policy: `activeDeadlineSeconds` fails a job that runs too long
(reason DeadlineExceeded, its Pods stopped); `ttlSecondsAfterFinished` deletes a finished
job. A finished job otherwise stays as it is: what still runs is stopped, finished Pods
are kept for their logs.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from ddpjob.job.decision import FAILED, FINISHED, HALTED, Plan
from ddpjob.job.step import ROUNDING, stopped_counts
from ddpjob.times import parse_time

if TYPE_CHECKING:
    from ddpjob.job.step import Step


def finished(step: Step) -> Plan | None:
    """A finished job: stop what still runs; delete the job once its TTL has passed."""
    if step.prev_phase not in FINISHED:
        return None
    prev, job, now = step.prev, step.job, step.now
    if step.prev_phase in HALTED:
        prev = stopped_counts(prev, job.nodes)  # a status written before this rule said 1/2
    if job.ttl_seconds_after_finished is None:
        return Plan(status=prev, delete=step.live)
    done = parse_time(prev.get("completionTime")) or now
    due = done + ROUNDING + timedelta(seconds=job.ttl_seconds_after_finished)
    if now >= due:
        return Plan(status=prev, delete=step.live, delete_job=True)
    return Plan(status=prev, delete=step.live, requeue_after=(due - now).total_seconds())


def exceeded(step: Step) -> Plan | None:
    """Past activeDeadlineSeconds (counted from startTime): the job fails."""
    deadline = step.deadline
    if deadline is None or step.now < deadline:
        return None
    msg = f"ran longer than activeDeadlineSeconds={step.job.active_deadline_seconds}"
    return Plan(
        status=step.status(FAILED, "DeadlineExceeded", msg, completionTime=step.now_s),
        delete=step.live,
        requeue_after=step.ttl_in,
        events=step.on_entry(FAILED, "Warning", "DeadlineExceeded", msg),
    )
