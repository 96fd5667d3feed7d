"""The re-create backoff of an elastic job's lost indices (`status.lostIndices`), pure.

A lost index (its Pod failed, evicted, deleted, its node gone) is created again after
`restartBackoffSeconds`, doubled for each loss in a row of that same index and capped as
the gang restart is (restart_policy.backoff_seconds, backoff.py): a Pod that keeps failing,
on a bad node say, is re-created ever less often instead of every few seconds, while the
other indices keep their own counts. The count lives in the status, so an operator that
restarts keeps it: one entry per index lost lately,
`{index, losses, lostAt, replaced, runningSince}`.

- A loss starts an entry, or adds one to the count of an index whose replacement had been
  created (`replaced`); a Pod still down in a later step is the same loss.
- Once the index's replacement has been Running for `HEALTHY_SECONDS` the entry goes:
  the next loss of that index waits `restartBackoffSeconds` again. The kubelet's rule for
  its CrashLoopBackOff (a container that ran 10 minutes resets it,
  https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#container-restarts).
- An index new to the job (spec.nodes raised) is no loss: it is created at once.
- Only a running elastic job keeps entries: a gang restart starts from none.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ddpjob.job.restart_policy import backoff_seconds
from ddpjob.times import parse_time

if TYPE_CHECKING:
    from ddpjob.job.step import Step

FIELD = "lostIndices"
HEALTHY_SECONDS = 600


def _time(value: Any) -> bool:
    try:
        t = parse_time(value) if isinstance(value, str) else None
    except ValueError:
        return False
    return t is not None and t.tzinfo is not None


def _valid(e: Any) -> bool:
    return (
        isinstance(e, dict)
        and type(e.get("index")) is int
        and type(e.get("losses")) is int
        and _time(e.get("lostAt"))
        and ("runningSince" not in e or _time(e["runningSince"]))
    )


def _previous(step: Step) -> dict[int, dict[str, Any]]:
    """The last status's entries; malformed ones (a hand-edited status) are dropped."""
    return {e["index"]: e for e in step.prev.get(FIELD) or [] if _valid(e)}


def entries(step: Step) -> dict[int, dict[str, Any]]:
    """index -> its entry, after what this step observes (the same for the same step)."""
    prev, out = _previous(step), {}
    known = int(step.prev.get("desiredNodes") or step.job.nodes)  # indices the job had before this step
    for r in range(step.job.nodes):
        entry, pod = prev.get(r), step.current.get(r)
        if pod is None or pod.phase == "Failed" or pod.deleting or pod.name in step.troubled:
            if entry is None and r >= known:
                continue  # a new index, not a lost one
            if entry is None or entry.get("replaced"):
                entry = {"index": r, "losses": (entry or {}).get("losses", 0) + 1, "lostAt": step.now_s}
            out[r] = entry
        elif entry is not None:
            entry = {**entry, "replaced": True}
            if pod.phase == "Running":
                entry["runningSince"] = entry.get("runningSince") or step.now_s
                if step.now - (parse_time(entry["runningSince"]) or step.now) >= timedelta(seconds=HEALTHY_SECONDS):
                    continue  # healthy again: its next loss starts the backoff anew
            out[r] = entry
    return out


def status_value(found: dict[int, dict[str, Any]]) -> list[dict[str, Any]] | None:
    return [found[r] for r in sorted(found)] or None


def wait(step: Step, entry: dict[str, Any] | None) -> float:
    """Seconds until the index of `entry` may be created again (0: now)."""
    if entry is None or entry.get("replaced"):
        return 0.0
    # At most 2^20 x base: more losses only mean the cap (and no huge power of two).
    losses = min(max(entry["losses"], 1), 20)
    due = (parse_time(entry.get("lostAt")) or step.now) + timedelta(
        seconds=backoff_seconds(step.job.restart_backoff_seconds, losses)
    )
    return max((due - step.now).total_seconds(), 0.0)


def healthy_in(step: Step, found: dict[int, dict[str, Any]]) -> float | None:
    """Seconds until the first running replacement counts as healthy (its entry goes)."""
    due = [
        ((parse_time(e["runningSince"]) or step.now) + timedelta(seconds=HEALTHY_SECONDS) - step.now).total_seconds()
        for e in found.values()
        if e.get("runningSince")
    ]
    return max(min(due), 0.0) if due else None


def describe(step: Step, entry: dict[str, Any]) -> str:
    """How long an index waits, and why, for the status message and the NodeLost Event."""
    left, losses = wait(step, entry), entry["losses"]
    if not left:
        return ""
    return f" in {left:.0f}s" + (f" (lost {losses} times in a row)" if losses > 1 else "")
