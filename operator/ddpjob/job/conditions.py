"""Kubernetes-style conditions derived from the phase, keeping transition times."""

from __future__ import annotations

from typing import Any, Mapping

CONDITION_TYPES = ("Running", "Restarting", "Suspended", "Succeeded", "Failed")
# What ends a condition, when that says more than the phase that follows it: a resumed
# job's Suspended=False would otherwise keep the first moment's "Starting: creating 2
# Pods" for the rest of its life.
ENDED_BY = {"Suspended": ("Resumed", "resumed: spec.suspend is false")}


def build_conditions(
    previous: list[Mapping[str, Any]] | None, phase: str, reason: str, message: str, now: str,
) -> list[dict[str, Any]]:
    """One condition per type that has ever been True; lastTransitionTime moves only
    when a condition's status flips, as kubectl wait and dashboards expect."""
    prev = {c.get("type"): c for c in previous or []}
    out = []
    for ctype in CONDITION_TYPES:
        active = ctype == phase
        old = prev.get(ctype)
        if not active and old is None:
            continue
        status = "True" if active else "False"
        changed = old is None or old.get("status") != status
        # A condition says why it has its status: one that turns False takes the reason and
        # message of what replaced it (Running=False, reason Succeeded), and keeps them
        # while it stays False.
        why = (reason, message) if active or ctype not in ENDED_BY else ENDED_BY[ctype]
        out.append({
            "type": ctype,
            "status": status,
            "reason": why[0] if active or changed else old.get("reason", ""),
            "message": why[1] if active or changed else old.get("message", ""),
            "lastTransitionTime": now if changed else old.get("lastTransitionTime", now),
        })
    # Conditions of other types (PodsCreated, ...) are set by their own logic: kept as they are.
    out += [dict(c) for c in previous or [] if c.get("type") not in CONDITION_TYPES]
    return out
