"""When a status write that only moves counts may wait.

A gang's Pods report in over a time that grows with its size: the watch delivers a
1,024-Pod gang's Running events over about 3 s on the development machine, and every
reconcile in that time would write the count it sees ("396/1024 nodes running"). Like
the Job controller, which batches a Job's Pod updates for a second
(pkg/controller/job: syncJobBatchPeriod), a write whose only changes are counts waits
until `interval(nodes)` has passed since the job's last status write: 0.2 s for gangs of
up to 40 nodes (as before), one second per 200 nodes above that, at most 5 s. A condition
whose message moved only in its numbers ("Scheduled 173/1024" in GangScheduled, while the
gang is placed) is a count too; a change of phase, of a condition's status, reason or
time, of what a message says, or of anything else is written at once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

NUMBER = re.compile(r"\d+")
COUNT_FIELDS = frozenset({"readyNodes", "nodes", "scheduledNodes", "message"})
MIN_INTERVAL, MAX_INTERVAL = 0.2, 5.0
NODES_PER_SECOND = 200.0  # about the rate at which a big gang's Pod events arrive here


def counts_only(previous: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    changed = {k for k in set(previous) | set(new) if previous.get(k) != new.get(k)}
    if "conditions" in changed and counts_in_messages_only(previous.get("conditions"), new.get("conditions")):
        changed = (changed - {"conditions"}) | {"message"}
    return bool(changed) and changed <= COUNT_FIELDS


def counts_in_messages_only(previous: Any, new: Any) -> bool:
    """The same conditions, in the same order, but for the numbers in their messages (a
    message that says something else, as a queue's verdict gone, is written at once)."""
    if not isinstance(previous, list) or not isinstance(new, list) or len(previous) != len(new):
        return False
    return all(
        isinstance(a, Mapping) and isinstance(b, Mapping) and _masked(a) == _masked(b)
        for a, b in zip(previous, new, strict=True)
    )


def _masked(condition: Mapping[str, Any]) -> dict[str, Any]:
    return {**condition, "message": NUMBER.sub("#", str(condition.get("message", "")))}


def interval(nodes: int) -> float:
    return min(MAX_INTERVAL, max(MIN_INTERVAL, nodes / NODES_PER_SECOND))


def wait(
    previous: Mapping[str, Any], new: Mapping[str, Any], nodes: int, last_write: float | None, now: float
) -> float:
    """Seconds the write of `new` over `previous` should wait (0: write now)."""
    return held(previous, new, nodes, None if last_write is None else now - last_write)


def held(previous: Mapping[str, Any], new: Mapping[str, Any], nodes: int, since_last_write: float | None) -> float:
    """The same, from the seconds since the last write (None: none yet)."""
    if since_last_write is None or not counts_only(previous, new):
        return 0.0
    return max(0.0, interval(nodes) - since_last_write)
