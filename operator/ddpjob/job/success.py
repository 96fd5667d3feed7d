"""Success policy: the job succeeds when every node of the current attempt has exited 0."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddpjob import text
from ddpjob.job.decision import SUCCEEDED, Plan

if TYPE_CHECKING:
    from ddpjob.job.step import Step


def plan(step: Step) -> Plan | None:
    job, current = step.job, step.current
    if len(current) != job.nodes or not all(p.phase == "Succeeded" for p in current.values()):
        return None
    msg = f"{text.all_of(job.nodes, 'node')} finished successfully"
    return Plan(
        status=step.status(SUCCEEDED, "Succeeded", msg, completionTime=step.now_s),
        requeue_after=step.ttl_in,
        events=step.on_entry(SUCCEEDED, "Normal", "Succeeded", msg),
    )
