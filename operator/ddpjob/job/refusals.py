"""How a refused create shows in a job's status: pure, like the rest of the job logic.

The `PodsCreated` condition says whether the operator could create what the plan asked
for: `False` with the API server's reason (`Forbidden` for a quota or Pod Security
denial, `NotOwned` for a name held by an object this job does not control, ...) and its
message while it cannot, `True` again once it could. The status message, which
`kubectl get ddpj` shows, says the same, so a waiting job always says why it waits.
"""

from __future__ import annotations

from typing import Any, Mapping

from ddpjob.job.conditions import build_conditions

PODS_CREATED = "PodsCreated"


def _set_condition(conditions: list[Mapping[str, Any]] | None, status: str, reason: str, message: str,
                   now: str) -> list[dict[str, Any]]:
    out, found = [], False
    for c in conditions or []:
        c = dict(c)
        if c.get("type") == PODS_CREATED:
            found = True
            if c.get("status") != status:
                c["lastTransitionTime"] = now
            c.update(status=status, reason=reason, message=message)
        out.append(c)
    if not found:
        out.append({"type": PODS_CREATED, "status": status, "reason": reason, "message": message,
                    "lastTransitionTime": now})
    return out


def refused_status(status: Mapping[str, Any], reason: str, message: str, created: int, wanted: int,
                   now: str) -> dict[str, Any]:
    """The plan's status of a job whose creates are refused: it waits, and says why."""
    waiting = f"{created}/{wanted} Pods created; waiting: {message}"
    return {**status, "message": waiting,
            "conditions": _set_condition(status.get("conditions"), "False", reason, message, now)}


def created_status(status: Mapping[str, Any], now: str) -> dict[str, Any]:
    """After a refusal, the creates went through: the condition flips back (never added otherwise)."""
    conditions = status.get("conditions") or []
    # A refusal that this very status still reports (the job logic's own, e.g. Pods of an
    # earlier incarnation) is current, not past.
    if not any(c.get("type") == PODS_CREATED and c.get("status") == "False"
               and str(c.get("message")) not in str(status.get("message")) for c in conditions):
        return dict(status)
    return {**status, "conditions": _set_condition(conditions, "True", "Created", "all Pods created", now)}


def failed_status(previous: Mapping[str, Any], reason: str, message: str, generation: int,
                  now: str) -> dict[str, Any]:
    """A permanent refusal (the API server finds the rendered Pod invalid): the job fails,
    because no retry can change the answer; the user fixes the spec."""
    st = {**dict(previous), "phase": "Failed", "message": message, "readyNodes": 0,
          "observedGeneration": generation, "restarts": int(previous.get("restarts", 0)), "completionTime": now}
    conditions = build_conditions(previous.get("conditions"), "Failed", "PodInvalid", message, now)
    st["conditions"] = _set_condition(conditions, "False", reason, message, now)
    return st
