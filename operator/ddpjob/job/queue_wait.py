"""Why a queued gang waits, in its queue's words: pure, read from a Kueue Workload.

A `gang: kueue` job's Pods are held by Kueue's scheduling gate (`kueue.x-k8s.io/admission`)
until their Workload (named after the attempt's Pod group) is admitted. The Pods'
PodScheduled condition then says only "Scheduling is blocked due to non-empty scheduling
gates"; the reason a user needs (quota used up, a LocalQueue that does not exist, a
ClusterQueue that is stopped) is on the Workload: its `QuotaReserved=False` condition
(e.g. `couldn't assign flavors to pod set main: insufficient unused quota for
nvidia.com/gpu in flavor gpu, 2 more needed`), or `Admitted=False` once quota is reserved
and admission checks are pending. `waiting_reason` turns that into the GangScheduled
condition's reason and message; the operator reads the Workload only for a job whose Pods
are gated (`operator/gang_readers/kueue.py`).
"""

from __future__ import annotations

from typing import Any, Mapping

GATE = "kueue.x-k8s.io/admission"
GATED = "SchedulingGated"  # the PodScheduled reason of a gated Pod (the API server's)
REASON = "Queued"  # GangScheduled's reason while the queue holds the gang


def _conditions(workload: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    status = workload.get("status") or {}
    return {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, Mapping)}


def waiting_reason(workload: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """(reason, message) while Kueue holds the Workload; None once it is admitted or
    finished, or when Kueue has not yet said anything (the gate's own words stay)."""
    if not workload:
        return None
    conds = _conditions(workload)
    if (conds.get("Finished") or {}).get("status") == "True":
        return None
    queue = (workload.get("spec") or {}).get("queueName") or "?"
    for ctype in ("QuotaReserved", "Admitted"):
        cond = conds.get(ctype)
        if cond is None:
            continue
        if cond.get("status") != "False":
            continue  # quota reserved: Admitted decides
        said = cond.get("message") or f"{ctype}=False ({cond.get('reason') or 'no reason given'})"
        return REASON, f"Kueue queue {queue}: {said}"
    return None


def gated_by_queue(reason: str | None) -> bool:
    """Whether a waiting Pod's PodScheduled reason is the one a queue's gate leaves."""
    return reason == GATED
