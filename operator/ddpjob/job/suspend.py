"""Suspend policy: `spec.suspend: true` deletes the gang's Pods and sets phase Suspended;
`false` starts them again (the creation policy), like a Kubernetes Job's suspend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddpjob.job.decision import SUSPENDED, Plan

if TYPE_CHECKING:
    from ddpjob.job.step import Step

MESSAGE = "suspended: Pods deleted; set spec.suspend to false to resume"


def plan(step: Step) -> Plan | None:
    if not step.job.suspend:
        return None
    # Like a Kubernetes Job, the deadline clock restarts on resume (startTime dropped).
    return Plan(
        status=step.status(SUSPENDED, "Suspended", MESSAGE, startTime=None),
        delete=tuple(p.name for p in step.pods if not p.deleting),
        events=step.on_entry(SUSPENDED, "Normal", "Suspended", MESSAGE),
    )
