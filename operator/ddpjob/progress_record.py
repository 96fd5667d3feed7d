"""The progress record: a small JSON file any training process may write, and what
ddpjob-launch, the operator and `ddpjob run` read from it.

Pure and dependency-free (the trainer image imports it without kopf, jinja2 or yaml).

Record (written by global rank 0 to $DDPJOB_PROGRESS_FILE, atomically):
    {"step": 120, "total_steps": 900, "epoch": 1, "total_epochs": 3,
     "samples_per_s": 5120.0, "loss": 0.41, "time": 1763900000.0, "stage": "training"}
Only `step` is required. `stage` says where the program is: `training` (the default),
`evaluating`, `saving` (a checkpoint), `exiting` (training is over; it tears down).
A record past its last step (`exiting`, or `step` at `total_steps`) is a job finishing,
never a stalled one: evaluating, saving and tearing down can take minutes. Heartbeats
(written by every rank to `<file>.rank<LOCAL_RANK>`):
    {"rank": 3, "step": 121, "time": ..., "step_time": ...}
`step` there is the step the rank has *reached* (entered), so when one rank hangs the
others, blocked in the next collective, are one step ahead of it: that names the culprit.
Each epoch's last record is also appended to `<file>.epochs` (a JSON line each, when the
next epoch's first is written): a reader that samples the record (ddpjob-launch's curve of
a program's own records, record_events.py) misses no epoch, however short.
"""

from __future__ import annotations

import contextlib
import glob
import json
import math
import os
import tempfile
import time
from collections.abc import Mapping
from typing import Any

INTS = ("step", "total_steps", "epoch", "total_epochs")
FLOATS = ("samples_per_s", "loss", "time")
TRAINING, EVALUATING, SAVING, EXITING = "training", "evaluating", "saving", "exiting"
STAGES = (TRAINING, EVALUATING, SAVING, EXITING)
HEARTBEAT_SUFFIX = ".rank"
EPOCHS_SUFFIX = ".epochs"
EPOCHS_MAX_BYTES = 1024 * 1024  # a line per epoch: thousands of epochs; past that, no more lines
MAX_BYTES = 64 * 1024  # a record is a few hundred bytes; refuse to parse anything huge


# JSON's safe integers: a bigger number is no step count, and one with thousands of digits
# written to status breaks clients that parse it as a float or an int64.
MAX_INT = 2**53


def _finite(v: int | float) -> bool:
    try:
        return math.isfinite(float(v)) and abs(v) <= MAX_INT
    except OverflowError:
        return False


def validate(record: Any) -> list[str]:
    """Errors naming each bad field; [] for a good record. Unknown fields are kept."""
    if not isinstance(record, Mapping):
        return ["progress record: must be a JSON object"]
    errors = []
    if "step" not in record:
        errors.append("step: required")
    for key in INTS:
        v = record.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_INT):
            errors.append(f"{key}: must be an integer from 0 to {MAX_INT} (got {str(v)[:40]!r})")
    for key in FLOATS:
        v = record.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not _finite(v)):
            errors.append(f"{key}: must be a finite number of at most {MAX_INT} in size (got {str(v)[:40]!r})")
    stage = record.get("stage")
    if stage is not None and stage not in STAGES:
        errors.append(f"stage: must be one of {', '.join(STAGES)} (got {str(stage)[:40]!r})")
    return errors


def past_last_step(record: Mapping | None) -> bool:
    """Training is over: the program says it is exiting, or it reached its last step (and
    may now evaluate, save a final checkpoint and tear down)."""
    if not record:
        return False
    total = record.get("total_steps")
    return record.get("stage") == EXITING or bool(total and record.get("step", 0) >= total)


def _write_json(path: str, obj: Mapping[str, Any]) -> None:
    # Write to a temporary name in the same directory, then rename: a reader sees the old
    # record or the new one, never half of one.
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".progress-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(obj, f, separators=(",", ":"))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write(path: str, step: int, **fields: Any) -> dict:
    """Write the record atomically; `time` defaults to now. Raises ValueError on a bad field."""
    record = {"step": step, **{k: v for k, v in fields.items() if v is not None}}
    record.setdefault("time", round(time.time(), 3))
    errors = validate(record)
    if errors:
        raise ValueError("; ".join(errors))
    previous = _last_written.get(path)
    _write_json(path, record)
    _last_written[path] = record
    if previous is not None and previous.get("epoch") is not None and previous.get("epoch") != record.get("epoch"):
        _append_epoch(path, previous)
    return record


_last_written: dict[str, dict] = {}  # record file -> the last record this process wrote there


def _append_epoch(path: str, record: Mapping[str, Any]) -> None:
    """An epoch's last record, one JSON line of `<path>.epochs`; never more than its cap,
    and a journal that cannot be written costs the curve its point, never the training."""
    try:
        fd = os.open(path + EPOCHS_SUFFIX, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < EPOCHS_MAX_BYTES:
                os.write(fd, (json.dumps(record, separators=(",", ":")) + "\n").encode())
        finally:
            os.close(fd)
    except OSError:
        pass


def read_epochs(path: str, offset: int, limit: int = MAX_BYTES) -> tuple[list[dict], int]:
    """The valid records of `<path>.epochs` from byte `offset` (whole lines, at most `limit`
    bytes), and the offset after them."""
    try:
        with open(path + EPOCHS_SUFFIX, "rb") as f:
            f.seek(offset)
            data = f.read(limit)
    except OSError:
        return [], offset
    whole = data[: data.rfind(b"\n") + 1]
    records = []
    for line in whole.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, Mapping) and not validate(record):
            records.append(dict(record))
    return records, offset + len(whole)


def _read_json(path: str) -> Any:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_BYTES:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


def read(path: str) -> dict | None:
    """The record, or None when it is missing or not a valid record."""
    record = _read_json(path)
    return dict(record) if record is not None and not validate(record) else None


def heartbeat_path(path: str, local_rank: int) -> str:
    return f"{path}{HEARTBEAT_SUFFIX}{local_rank}"


def write_heartbeat(path: str, local_rank: int, rank: int, step: int, step_time: float) -> None:
    _write_json(
        heartbeat_path(path, local_rank),
        {"rank": rank, "step": step, "time": round(time.time(), 3), "step_time": round(step_time, 3)},
    )


def read_heartbeats(path: str, now: float | None = None) -> dict[int, dict]:
    """Global rank -> {"step", "heartbeat_age", "step_age"} (seconds, this machine's clock)."""
    now = time.time() if now is None else now
    out = {}
    for name in glob.glob(glob.escape(path) + HEARTBEAT_SUFFIX + "*"):
        beat = _read_json(name)
        if not isinstance(beat, Mapping) or not all(
            isinstance(beat.get(k), (int, float)) for k in ("rank", "step", "time", "step_time")
        ):
            continue
        out[int(beat["rank"])] = {
            "step": int(beat["step"]),
            "heartbeat_age": round(max(0.0, now - beat["time"]), 3),
            "step_age": round(max(0.0, now - beat["step_time"]), 3),
        }
    return out


class Tracker:
    """What a reader (ddpjob-launch, `ddpjob run`) knows beyond the latest record: when it
    last advanced, and the step rate since it was first seen (for the ETA)."""

    def __init__(self, started_at: float | None = None):
        self.started_at = time.time() if started_at is None else started_at
        self.first: tuple[int, float] | None = None  # (step, time) first seen
        self.last_step: int | None = None
        self.advanced_at = self.started_at

    def snapshot(self, path: str, now: float | None = None) -> dict:
        """The document `/progress` serves: {"record", "seconds_since_progress", "eta_seconds", "ranks"}."""
        now = time.time() if now is None else now
        record = read(path)
        if record is not None and record["step"] != self.last_step:
            self.last_step = record["step"]
            self.advanced_at = now
            if self.first is None:
                self.first = (record["step"], now)
        return {
            "record": record,
            "seconds_since_progress": round(now - self.advanced_at, 3),
            "eta_seconds": self.eta(record, now),
            "ranks": {str(r): v for r, v in sorted(read_heartbeats(path, now).items())},
        }

    def eta(self, record: Mapping | None, now: float) -> int | None:
        if not record or not record.get("total_steps") or self.first is None:
            return None
        step0, t0 = self.first
        if record["step"] <= step0 or now <= t0:
            return None
        rate = (record["step"] - step0) / (self.advanced_at - t0) if self.advanced_at > t0 else None
        if not rate:
            return None
        return max(0, int((record["total_steps"] - record["step"]) / rate))


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    s = int(seconds)
    if s >= 86400:
        return f"{s // 86400}d{s % 86400 // 3600}h"
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def summary(record: Mapping | None) -> str:
    """One short line for people (kubectl's PROGRESS column, `ddpjob run`)."""
    if not record:
        return ""
    parts = []
    if record.get("epoch") is not None:
        parts.append(f"epoch {record['epoch']}" + (f"/{record['total_epochs']}" if record.get("total_epochs") else ""))
    step = f"step {record['step']}"
    if record.get("total_steps"):
        step += f"/{record['total_steps']} ({100 * record['step'] // max(1, record['total_steps'])}%)"
    parts.append(step)
    stage = record.get("stage")
    return " ".join(parts) + (f", {stage}" if stage in STAGES and stage != TRAINING else "")
