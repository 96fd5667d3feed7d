"""Invalid spec policy: a spec the job logic refuses (it does not parse, the template asks
for what the operator's templatePolicy does not allow, or an update changed an immutable
field) fails the job with reason InvalidSpec; nothing is created and nothing left running.
A job that already succeeded is not rewritten by a later bad edit.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ddpjob.job.conditions import build_conditions
from ddpjob.job.decision import FAILED, LIVE_POD_PHASES, SUCCEEDED, Event, Observed, Plan
from ddpjob.job.step import stopped_counts
from ddpjob.times import format_time


def invalid_status(
    errors: list[str], generation: int, previous: Mapping[str, Any] | None, now: datetime
) -> dict[str, Any]:
    """Status of a job whose spec is rejected: Failed, nothing created."""
    message = "; ".join(errors)
    return {
        **stopped_counts(previous or {}, None),
        "phase": FAILED,
        "message": message,
        "observedGeneration": generation,
        "restarts": int((previous or {}).get("restarts", 0)),
        "conditions": build_conditions(
            (previous or {}).get("conditions"), FAILED, "InvalidSpec", message, format_time(now)
        ),
    }


def plan(observed: Observed) -> Plan:
    previous = dict(observed.previous or {})
    if previous.get("phase") == SUCCEEDED:
        return Plan(status=previous)
    new = invalid_status(list(observed.errors), observed.generation, previous, observed.now)
    if new.get("message") == previous.get("message") and previous.get("phase") == FAILED:
        new = previous  # already reported: keep the stored conditions' times
    live = tuple(p.name for p in observed.pods if p.phase in LIVE_POD_PHASES and not p.deleting and not p.leftover)
    events = (Event("Warning", "InvalidSpec", new["message"]),) if new != previous else ()
    return Plan(status=new, delete=live, events=events)
