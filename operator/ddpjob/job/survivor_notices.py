"""Whom a running elastic job's surviving Pods must hear of (`Plan.tell_lost`), pure.

A Pod of the current attempt that failed, is being deleted, or runs on a node that
stopped reporting (Running, Ready False: the node lifecycle controller's mark) is named
in every step that sees it so; the operator and `ddpjob run` send each one to the other
running Pods once (ddpjob.notice), and a group that resizes in place re-forms without
it at once (ddpjob_trainer.roster) instead of waiting for a collective to fail or time
out. A job that restarts its workers at each resize (torchrun's) ignores the notices.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ddpjob.job.decision import RUNNING, Plan

if TYPE_CHECKING:
    from ddpjob.job.step import Step


def annotate(step: Step, plan: Plan) -> Plan:
    if step.job.elastic is None or plan.status.get("phase") != RUNNING:
        return plan
    lost = sorted(
        p.name
        for p in step.current.values()
        if p.phase == "Failed" or p.deleting or (p.phase == "Running" and not p.ready) or p.name in step.troubled
    )
    return replace(plan, tell_lost=tuple(lost)) if lost else plan
