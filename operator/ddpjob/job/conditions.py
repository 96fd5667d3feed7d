"""Kubernetes-style conditions: the one way a status condition is set, and the phase's own.

`set_condition` is what `meta.SetStatusCondition` is for Kubernetes controllers (and
JobSet's one condition helper): the condition of a type is added or updated in place,
and its `lastTransitionTime` moves only when its status flips, as `kubectl wait` and
dashboards expect. Every condition of the status goes through it: the phase conditions
(`build_conditions`), `PodsCreated` (creation.py), `GangScheduled` (gang_wait.py,
scheduling.py) and `Stalled` (stall.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

CONDITION_TYPES = ("Running", "Restarting", "Suspended", "Succeeded", "Failed")
# What ends a condition, when that says more than the phase that follows it: a resumed
# job's Suspended=False would otherwise keep the first moment's "Starting: creating 2
# Pods" for the rest of its life.
ENDED_BY = {"Suspended": ("Resumed", "resumed: spec.suspend is false")}


def find(conditions: Sequence[Mapping[str, Any]] | None, ctype: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions or [] if c.get("type") == ctype), None)


def transition_time(conditions: Sequence[Mapping[str, Any]] | None, ctype: str, status: str, now: str) -> str:
    """When the condition of `ctype` took `status`: its lastTransitionTime while it keeps
    its status, `now` when it is new or flips."""
    old = find(conditions, ctype)
    if old is None or old.get("status") != status:
        return now
    return str(old.get("lastTransitionTime") or now)


def set_condition(
    conditions: Sequence[Mapping[str, Any]] | None, ctype: str, status: str, reason: str, message: str, now: str
) -> list[dict[str, Any]]:
    """`conditions` with the one of `ctype` set (added at the end when new, else in its
    place): reason and message always, lastTransitionTime only on a flip of its status."""
    new = {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": transition_time(conditions, ctype, status, now),
    }
    out = [new if c.get("type") == ctype else dict(c) for c in conditions or []]
    return out if any(c.get("type") == ctype for c in conditions or []) else [*out, new]


def build_conditions(
    previous: Sequence[Mapping[str, Any]] | None,
    phase: str,
    reason: str,
    message: str,
    now: str,
) -> list[dict[str, Any]]:
    """One condition per phase type that has ever been True, in CONDITION_TYPES' order,
    then the conditions of other types (PodsCreated, ...) as they were: each is set by
    its own logic. A condition says why it has its status: one that turns False takes the
    reason and message of what replaced it (Running=False, reason Succeeded), and keeps
    them while it stays False."""
    prev = list(previous or [])
    out: list[dict[str, Any]] = [dict(c) for t in CONDITION_TYPES if (c := find(prev, t)) is not None]
    for ctype in CONDITION_TYPES:
        old = find(out, ctype)
        if ctype == phase:
            out = set_condition(out, ctype, "True", reason, message, now)
        elif old is not None and old.get("status") != "False":
            out = set_condition(out, ctype, "False", *ENDED_BY.get(ctype, (reason, message)), now)
    order = {t: i for i, t in enumerate(CONDITION_TYPES)}
    out.sort(key=lambda c: order[c["type"]])
    return out + [dict(c) for c in prev if c.get("type") not in CONDITION_TYPES]
