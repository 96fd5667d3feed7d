"""One step of the job logic, as every policy reads it: the observation sorted once (the
current attempt's Pods, leftovers, live ones), the gang's wait (observed before the step:
gang_wait.py), the timers, and `status()`, which builds a whole new status (counts,
resolved values, conditions, progress) for a phase.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from ddpjob.api import accepted_spec
from ddpjob.api.spec import DDPJob
from ddpjob.job import node_loss, stall
from ddpjob.job.conditions import build_conditions
from ddpjob.job.decision import HALTED, LIVE_POD_PHASES, PENDING, RUNNING, SUCCEEDED, Event, Observed
from ddpjob.job.gang_wait import GangWait
from ddpjob.job.observe import attempt_pods
from ddpjob.times import format_time, parse_time

# Status times have whole seconds (format_time drops the fraction), so a time read back
# may be up to a second before the event. Deadlines and TTLs count from the end of that
# second: they fire no earlier than asked (and at most a second later).
ROUNDING = timedelta(seconds=1)


def stopped_counts(status: Mapping[str, Any], desired: int | None) -> dict[str, Any]:
    """`status` with the counts of a job that stopped short of success (Failed, Suspended,
    interrupted): no Pod runs, or each one still running is being stopped, so NODES says
    0/desired and readyNodes 0, whatever ran when it stopped. (A job that succeeded says
    how many of its nodes did: N/N.)"""
    desired = desired if desired is not None else status.get("desiredNodes")
    return {**status, "readyNodes": 0, **({"nodes": f"0/{desired}"} if desired is not None else {})}


def resolved(job: DDPJob) -> dict[str, Any]:
    """What 'auto' became, for `kubectl get` (the PROCS column) and for people."""
    return {"nprocPerNode": job.nproc_per_node, "backend": job.backend, "worldSize": job.world_size}


class Step:
    def __init__(self, observed: Observed, gang_wait: GangWait):
        job = observed.job
        assert job is not None  # an unparsed spec is invalid_spec's, before any Step
        self.observed, self.job = observed, job
        self.prev = dict(observed.previous or {})
        self.prev_phase = self.prev.get("phase")
        self.restarts = int(self.prev.get("restarts", 0))
        self.now: datetime = observed.now
        self.now_s = format_time(observed.now)
        pods = list(observed.pods)
        self.current = attempt_pods(pods, self.restarts, job.nodes)
        self.leftover = [p for p in pods if p.leftover or p.restart_count != self.restarts or p.node_rank >= job.nodes]
        # Pods of an earlier DDPJob of this name (another uid) are never touched: the garbage
        # collector removes them once their owner is gone; this job only waits for them.
        self.foreign = [p for p in pods if p.leftover]
        self.pods = [p for p in pods if not p.leftover]
        self.live = tuple(p.name for p in self.pods if p.phase in LIVE_POD_PHASES and not p.deleting)
        progress = observed.progress
        self.progress = progress if progress is not None and progress.restart_count == self.restarts else None
        self.stalled: str | None = None  # set by the failure policy when the gang hangs
        self.gang_wait = gang_wait
        # Live members on a lost or unhealthy node (node_loss.py), as disruptions, by name:
        # not running for any count, and lost to every policy.
        self.troubled = {p.name: p for p in node_loss.members(observed, self.current)}
        # The step that finishes a job must also wake it when its TTL is due.
        self.ttl_in = float(job.ttl_seconds_after_finished) if job.ttl_seconds_after_finished is not None else None

    @property
    def deadline(self) -> datetime | None:
        started = parse_time(self.prev.get("startTime"))
        if not (self.job.active_deadline_seconds and started):
            return None
        return started + ROUNDING + timedelta(seconds=self.job.active_deadline_seconds)

    @property
    def deadline_in(self) -> float | None:
        deadline = self.deadline
        return (deadline - self.now).total_seconds() if deadline is not None else None

    def status(self, phase: str, reason: str, message: str, **changes: Any) -> dict[str, Any]:
        """The whole status for `phase`; `changes` set (or with None drop) fields."""
        job, prev, progress = self.job, self.prev, self.progress
        # Nodes running or done with success; a job stopped short of success has none
        # (what still runs is being stopped).
        ready = (
            0
            if phase in HALTED
            else sum(
                1
                for p in self.current.values()
                if p.phase in ("Running", "Succeeded") and not p.deleting and p.name not in self.troubled
            )
        )
        st = {
            **prev,
            "phase": phase,
            "message": message,
            "restarts": self.restarts,
            "readyNodes": ready,
            "nodes": f"{ready}/{job.nodes}",
            "desiredNodes": job.nodes,
            "scheduledNodes": self.gang_wait.scheduled,
            "observedGeneration": job.generation,
            **resolved(job),
            # What the operator accepted of the immutable fields (api/accepted_spec.py).
            accepted_spec.FIELD: accepted_spec.fingerprint(job),
            **changes,
        }
        st["conditions"] = stall.conditions(
            self.gang_wait.conditions(
                build_conditions(prev.get("conditions"), phase, reason, message, self.now_s), self.now_s
            ),
            self.stalled,
            phase == RUNNING
            and progress is not None
            and progress.record is not None
            and progress.seconds_since_progress < (job.stall_timeout_seconds or 60),
            self.now_s,
        )
        attempt = int(st.get("restarts") or 0)  # the attempt this status is about (a restart moves it on)
        fresh = progress if progress is not None and progress.restart_count == attempt else None
        st["progress"] = (
            self.last_progress(phase, attempt)
            or (stall.status_progress(fresh, self.now) if fresh else None)
            or self.kept_progress(phase, attempt)
        )
        if phase != RUNNING and isinstance(st.get("progress"), dict):
            # A job that is not running has no time left to estimate: the last record stays
            # (where training got to), marked final, its ETA goes and the ETA column is empty.
            st["progress"] = stall.final_progress(st["progress"], phase)
        return {k: v for k, v in st.items() if v is not None}

    def last_progress(self, phase: str, attempt: int) -> dict[str, Any] | None:
        """A job that succeeded: the last record, which Pod 0 left as its termination
        message (a short job may end between two reads of its progress)."""
        pod0 = self.current.get(0)
        if phase != SUCCEEDED or pod0 is None or pod0.phase != "Succeeded":
            return None
        record = stall.record_of(pod0.message)
        return stall.status_progress(stall.ProgressState(attempt, 0.0, record), self.now) if record else None

    def kept_progress(self, phase: str, attempt: int) -> dict[str, Any] | None:
        """The last record, while it is still this attempt's: a gang restart (a new attempt)
        or a start after a resume (phase Pending: the Pods that wrote it are gone) begins
        with none, so the last attempt's progress is never shown as the current one's."""
        kept = self.prev.get("progress")
        if not isinstance(kept, dict) or phase == PENDING or kept.get("attempt", attempt) != attempt:
            return None
        return kept

    def on_entry(self, phase: str, kind: str, reason: str, message: str) -> tuple[Event, ...]:
        """An Event said once, by the step that enters `phase`."""
        return (Event(kind, reason, message),) if phase != self.prev_phase else ()

    @staticmethod
    def earliest(*timers: float | None) -> float | None:
        due = [t for t in timers if t is not None]
        return min(due) if due else None
