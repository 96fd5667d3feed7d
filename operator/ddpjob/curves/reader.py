"""The metrics log (`metrics.jsonl`: the trainer's JSON lines beside its checkpoints,
record.py) read back as curves against the global step.

Users: `ddpjob run`'s final summary and `ddpjob plot` (local jobs: `./.ddpjob/<name>/
checkpoints/metrics.jsonl`), and the tests that hold these curves to the event files
ddpjob_trainer.event_files writes from the same records, under record.TAGS, with the same
rule. A job with no metrics.jsonl (no `spec.checkpoint`) still has its event files under
`ddpjob run`: `job_curves` reads those back with TensorBoard's own reader.

The log is appended to across attempts; what an earlier attempt logged after the step
a later one went on from is dropped (record.POSITIONS). Pure: no file is read beyond
`MAX_BYTES`, and a torn or foreign line is skipped.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ddpjob.curves.record import MAX_STEP, POSITIONS, TAGS
from ddpjob.numbers import finite
from ddpjob.text import clean

# ddpjob-train's progress line in a Pod's log (ddpjob_trainer/progress.py, Progress.step):
# `epoch 2/3 step 120 loss 0.4123 acc 0.8900 5120 samples/s`.
# Its numbers are taken loosely and checked one by one: a Pod's log is its own to write
# (`loss - acc`, `1.2.3`, a 5,000-digit step), and such a line is reported, never raised.
LOG_LINE = re.compile(r"\bepoch [0-9]+/[0-9]+ step (\S+) loss (\S+) acc ")
STEP = re.compile(r"[0-9]{1,18}")  # an int64, in ASCII digits
LOSS = re.compile(r"[-+]?(?:[0-9]{1,30}\.?[0-9]{0,30}|\.[0-9]{1,30})(?:[eE][-+]?[0-9]{1,4})?|[-+]?(?:nan|inf)")
MAX_BYTES = 256 * 1024 * 1024  # a 10-million-step job logged every step is about 1.5 GB: its tail
CHUNK_LINES = 4096  # read()'s lines decoded in one call
NOT_CURVES = frozenset({"step", "epoch", "restart", "time"})  # a record's numbers that are not curves


def read(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of a metrics log ([] when there is none); only its last MAX_BYTES.

    Lines are decoded CHUNK_LINES at a time as one JSON array (about half the time of one
    call a line), and a chunk that does not decode whole, or not into one value a line (a
    torn, foreign or hostile line), line by line."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - MAX_BYTES))
            data = f.read()
    except OSError:
        return []
    lines = [line for line in data.splitlines() if line.strip()]
    if size > MAX_BYTES and lines:
        del lines[0]  # cut in the middle
    del data
    records: list[dict[str, Any]] = []
    for first in range(0, len(lines), CHUNK_LINES):
        chunk = lines[first : first + CHUNK_LINES]
        try:
            values = json.loads(b"[" + b",".join(chunk) + b"]")
        except (ValueError, RecursionError):
            values = None
        if not isinstance(values, list) or len(values) != len(chunk):
            values = [_value(line) for line in chunk]
        records += [rec for rec in values if isinstance(rec, dict)]
    return records


def _value(line: bytes) -> Any:
    try:
        return json.loads(line)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past the parser's depth
        return None


def curves(records: Iterable[Mapping[str, Any]], event: str = "step") -> dict[str, list[tuple[int, float]]]:
    """Field -> [(step, value)] of one event's numeric fields, steps increasing.

    One pass from the end: a point survives when no later position record went back to
    before its step (the least such step so far is `limit`), and the latest point of a
    step wins. Linear in the records: dropping each series' later points at each position
    record, going forwards, was quadratic (a few thousand resumes took seconds)."""
    points: dict[str, dict[int, float]] = {}
    limit = MAX_STEP
    for rec in reversed(records if isinstance(records, Sequence) else list(records)):
        step = rec.get("step")
        if type(step) is not int or not 0 <= step <= MAX_STEP:  # type(): not a bool either
            continue
        what = rec.get("event")
        if what in POSITIONS and step < limit:
            limit = step
        if what != event or step > limit:
            continue
        for key, value in rec.items():  # the common cases first: a float, a word
            kind = type(value)
            if kind is float:
                number: float | None = value if value - value == 0.0 else None  # x - x: NaN for NaN and inf
            elif kind is str or key in NOT_CURVES:
                continue
            else:
                number = finite(value)  # a hostile file's non-number is skipped like any other
            if number is None or key in NOT_CURVES:
                continue
            series = points.get(key)
            if series is None:
                series = points[key] = {}
            series.setdefault(step, number)  # the latest record's value of a step stays
    return {key: sorted(series.items()) for key, series in points.items()}


def curve(records: Iterable[Mapping[str, Any]], key: str, event: str = "step") -> list[tuple[int, float]]:
    return curves(records, event).get(key, [])


def from_event_files(logdir: str | os.PathLike[str], event: str = "step") -> dict[str, list[tuple[int, float]]]:
    """The same curves from a job's TensorBoard event files, read by TensorBoard's own
    reader (which applies the restart marks); {} without TensorBoard or files."""
    if not os.path.isdir(logdir):
        return {}
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        return {}
    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags().get("scalars", ()))
    return {
        key: [(e.step, e.value) for e in acc.Scalars(tag)] for key, tag in TAGS.get(event, {}).items() if tag in tags
    }


def job_curves(
    metrics_file: str | os.PathLike[str], logdir: str | os.PathLike[str], event: str = "step"
) -> dict[str, list[tuple[int, float]]]:
    """A job's curves: from its metrics.jsonl, else from its event files."""
    records = read(metrics_file)
    return curves(records, event) if records else from_event_files(logdir, event)


def from_log(text: str) -> list[tuple[int, float]]:
    """The losses ddpjob-train printed in one log (one attempt's Pod: `ddpjob describe`
    of a cluster job, whose metrics.jsonl is on the checkpoint volume), steps increasing."""
    return read_log(text)[0]


def read_log(text: str) -> tuple[list[tuple[int, float]], list[str]]:
    """from_log's points, and one line for each progress line whose step or loss is not a
    number (`line 12: loss '-' is not a number: epoch 1/2 step 3 loss - acc 0.1`), its text
    escaped and cut. NaN and infinite losses (a diverged run prints them) are left out."""
    points: dict[int, float] = {}
    bad: list[str] = []
    counted, line_number = 0, 1  # line numbers counted once, forwards
    for match in LOG_LINE.finditer(text):
        step_text, loss_text = match.groups()
        if not STEP.fullmatch(step_text):
            what = f"step {clean(step_text, 24)!r} is not a step number"
        elif not LOSS.fullmatch(loss_text):
            what = f"loss {clean(loss_text, 24)!r} is not a number"
        else:
            loss = float(loss_text)
            if math.isfinite(loss):
                points[int(step_text)] = loss
            continue
        start = text.rfind("\n", 0, match.start()) + 1
        end = text.find("\n", match.end())
        line = text[start : end if end >= 0 else len(text)]
        line_number, counted = line_number + text.count("\n", counted, start), start
        bad.append(f"line {line_number}: {what}: {clean(line, 120)}")
    return sorted(points.items()), bad
