"""Stall detection and the progress part of the status, pure.

The operator (from Pod 0's /progress) and `ddpjob run` (from the files themselves) build
the same `ProgressState`; the failure policy asks `check()` whether the gang has stalled:
every Pod Running, `spec.stallTimeoutSeconds` set, the progress record of the current
attempt not advanced for that long, and the record not past its last step (the trainer
then says it is evaluating, saving or exiting: `progress_record.past_last_step`). A stall is
then a failure of its own (reason `Stalled`): the gang restarts and resumes from its last
checkpoint.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ddpjob import numbers, progress_record, times
from ddpjob.job.conditions import find, set_condition

STALLED = "Stalled"
MAX_SECONDS = 10 * 365 * 86400  # a number of seconds past this is a lie, not a job
MAX_RANKS = 1024 * 256  # spec.nodes x spec.nprocPerNode at most


def _number(value: Any) -> float | None:
    """A finite number of seconds in range, else None (NaN, Infinity, strings, 4,000 digits)."""
    number = numbers.finite(value)
    return number if number is not None and 0 <= number <= MAX_SECONDS else None


def _ranks(value: Any, world_size: int) -> dict[int, dict[str, int]]:
    """rank -> {"step"}: only ranks of this job, only a bounded integer step; a map of any
    other shape or size costs at most one pass over its first `world_size` entries."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError("ranks must be a JSON object")
    out: dict[int, dict[str, int]] = {}
    for key, view in value.items():
        if len(out) >= world_size:
            break
        if not isinstance(key, str) or not key.isdigit() or len(key) > 7 or not isinstance(view, Mapping):
            continue
        step = view.get("step")
        if isinstance(step, int) and not isinstance(step, bool) and 0 <= step <= progress_record.MAX_INT:
            rank = int(key)
            if rank < world_size:
                out[rank] = {"step": step}
    return out


@dataclass(frozen=True)
class ProgressState:
    restart_count: int  # the gang attempt whose launcher answered
    seconds_since_progress: float  # since the record last advanced, or since the launcher started
    record: Mapping[str, Any] | None = None
    eta_seconds: int | None = None
    ranks: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)  # global rank -> heartbeat view

    @classmethod
    def from_snapshot(cls, snap: Any, restart_count: int, world_size: int = MAX_RANKS) -> ProgressState:
        """From a `/progress` document (progress_record.Tracker.snapshot), which a training
        Pod wrote and so is untrusted: ValueError unless it is an object with a finite
        `seconds_since_progress` in range; a bad record or ETA is dropped; at most
        `world_size` ranks kept, each only as its bounded step."""
        if not isinstance(snap, Mapping):
            raise ValueError("a /progress answer must be a JSON object")
        seconds = _number(snap.get("seconds_since_progress") or 0)
        if seconds is None:
            raise ValueError(f"seconds_since_progress must be a number from 0 to {MAX_SECONDS}")
        record = snap.get("record")
        eta = _number(snap.get("eta_seconds"))
        return cls(
            restart_count=restart_count,
            seconds_since_progress=seconds,
            record=record if record and not progress_record.validate(record) else None,
            eta_seconds=int(eta) if eta is not None else None,
            ranks=_ranks(snap.get("ranks"), world_size),
        )

    def with_ranks(self, ranks: Mapping[int, Mapping[str, Any]]) -> ProgressState:
        return ProgressState(
            self.restart_count, self.seconds_since_progress, self.record, self.eta_seconds, {**self.ranks, **ranks}
        )


def _ranges(ranks: list[int]) -> str:
    out, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            out.append(str(start) if start == r else f"{start}-{r}")
            start = None
    return ",".join(out)


def stale_ranks(progress: ProgressState, world_size: int) -> tuple[list[int], str]:
    """(ranks, description). A rank blocked in a collective has reached the next step; the
    one it waits for has not: the ranks behind the furthest one are the stale ones."""
    ranks = progress.ranks
    missing = [r for r in range(world_size) if r not in ranks]
    if not ranks:
        return list(range(world_size)), "no rank reported a heartbeat"
    top = max(b["step"] for b in ranks.values())
    behind = sorted(r for r, b in ranks.items() if b["step"] < top)
    if behind:
        steps = sorted({ranks[r]["step"] for r in behind})
        at = f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"
        text = f"rank(s) {_ranges(behind)} stopped at {at} while the others reached step {top}"
    else:
        behind = sorted(ranks)
        text = f"all reporting ranks ({_ranges(behind)}) stopped at step {top}"
    if missing and len(missing) < world_size:
        text += f"; no heartbeat seen from rank(s) {_ranges(missing)}"
    return behind, text


def check(timeout: int | None, progress: ProgressState | None, restarts: int, world_size: int) -> str | None:
    """The stall message, or None. Called only while every Pod of the gang runs."""
    if not timeout or progress is None or progress.restart_count != restarts:
        return None
    if progress.record is None:
        # The clock starts at the attempt's first record: start-up (image pull, data download,
        # rendezvous) has its own timeouts and may take longer than a step ever should.
        return None
    if progress.seconds_since_progress < timeout:
        return None
    if progress_record.past_last_step(progress.record):
        # Past its last step the program evaluates, saves and tears down: no step advances
        # for as long as that takes, and none of it is a hang.
        return None
    _, ranks = stale_ranks(progress, world_size)
    where = f" (last: {progress_record.summary(progress.record)})"
    return f"no progress for {progress.seconds_since_progress:.0f}s (stallTimeoutSeconds={timeout}){where}; {ranks}"


def conditions(built: list[dict[str, Any]], stalled: str | None, advancing: bool, now: str) -> list[dict[str, Any]]:
    """`built` (the step's conditions, a `Stalled` one kept as it was) with `Stalled` set:
    True when this step found a stall, False once a later attempt advances again."""
    old = find(built, STALLED)
    if stalled is not None:
        return set_condition(built, STALLED, "True", STALLED, stalled, now)
    if old is not None and advancing and old.get("status") == "True":
        return set_condition(built, STALLED, "False", "Progressing", "the progress record advances again", now)
    return built


def _time(seconds: float) -> str:
    return times.format_timestamp(seconds)


def status_progress(progress: ProgressState, now: datetime) -> dict[str, Any] | None:
    """`status.progress`; stable while the record is (so an unchanged job costs no write)."""
    record = progress.record
    if not record:
        return None
    out = {
        "step": record["step"],
        "totalSteps": record.get("total_steps"),
        "epoch": record.get("epoch"),
        "totalEpochs": record.get("total_epochs"),
        "samplesPerSecond": record.get("samples_per_s"),
        "loss": record.get("loss"),
        "etaSeconds": progress.eta_seconds,
        "eta": progress_record.format_duration(progress.eta_seconds) or None,
        "summary": progress_record.summary(record),
        "attempt": progress.restart_count,
    }
    # The trainer's clock says when it wrote the record; without one, when it last advanced.
    when = record.get("time")
    out["updateTime"] = (
        _time(when)
        if isinstance(when, (int, float))
        else (now - timedelta(seconds=progress.seconds_since_progress)).strftime(times.FORMAT)
    )
    return {k: v for k, v in out.items() if v is not None}


def record_of(message: str | None) -> Mapping[str, Any] | None:
    """The progress record a finished Pod left as its termination message (ddpjob-launch
    writes the last one there when its run succeeded), else None. Untrusted: a valid record
    or nothing."""
    if not message or not message.startswith("{") or len(message) > progress_record.MAX_BYTES:
        return None
    try:
        record = json.loads(message)
    except ValueError:
        return None
    return record if not progress_record.validate(record) else None


def final_progress(progress: Mapping[str, Any], phase: str) -> dict[str, Any]:
    """The last record of a job that stopped (Succeeded, Failed, Suspended), marked final:
    no ETA, and a summary that says it is the last one read (records are read every 30 s,
    so a job that succeeded may have been read last at 93%), unless it is complete."""
    record = {
        "step": progress.get("step", 0),
        "total_steps": progress.get("totalSteps"),
        "epoch": progress.get("epoch"),
        "total_epochs": progress.get("totalEpochs"),
    }
    last = progress_record.summary(record)
    complete = bool(record["total_steps"]) and record["step"] >= record["total_steps"]
    summary = (last if complete else f"done (last read: {last})") if phase == "Succeeded" else f"last read: {last}"
    return {**{k: v for k, v in progress.items() if k not in ("eta", "etaSeconds")}, "final": True, "summary": summary}
