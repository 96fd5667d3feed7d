"""The metrics log (`metrics.jsonl`: the trainer's JSON lines beside its checkpoints) read
back as curves against the global step.

Users: `ddpjob run`'s final summary and `ddpjob plot` (local jobs: `./.ddpjob/<name>/
checkpoints/metrics.jsonl`), ddpjob_trainer.event_files (which writes the same points as
TensorBoard event files, under `TAGS`, with the same rule), and the tests that hold the
two to each other. A job with no metrics.jsonl (no `spec.checkpoint`) still has its event
files under `ddpjob run`: `job_curves` reads those back with TensorBoard's own reader.

The log is appended to across attempts. Where training goes on from is written down (a
`position` record: a start, a resume, a join; a `resize`; the `resume` record of logs older
than that): an attempt that resumed from step S trains the steps after S again, so what
earlier attempts logged after S is dropped. One continuous curve, no step twice, as
TensorBoard draws it. Pure: no file is read beyond `MAX_BYTES`, and a torn or foreign line
is skipped.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

FILE = "metrics.jsonl"
POSITIONS = ("position", "resume", "resize")
# Record field -> TensorBoard tag, per event. An epoch's last step is also a step record,
# so an epoch's own numbers have their own tags (no step drawn twice).
TAGS: dict[str, dict[str, str]] = {
    "step": {
        "loss": "train/loss",
        "accuracy": "train/accuracy",
        "lr": "train/lr",
        "samples_per_s": "train/samples_per_s",
        "gpu_mem_allocated_gb": "gpu/peak_allocated_gb",
        "gpu_mem_reserved_gb": "gpu/peak_reserved_gb",
    },
    "epoch": {
        "loss": "epoch/loss",
        "accuracy": "epoch/accuracy",
        "eval_loss": "eval/loss",
        "eval_accuracy": "eval/accuracy",
    },
}
# ddpjob-train's progress line in a Pod's log (ddpjob_trainer/progress.py, Progress.step):
# `epoch 2/3 step 120 loss 0.4123 acc 0.8900 5120 samples/s`.
LOG_LINE = re.compile(r"\bepoch \d+/\d+ step (\d+) loss ([-+0-9.eE]+|nan|inf) acc ")
MAX_BYTES = 256 * 1024 * 1024  # a 10-million-step job logged every step is about 1.5 GB: its tail


def read(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of a metrics log ([] when there is none); only its last MAX_BYTES."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - MAX_BYTES))
            data = f.read()
    except OSError:
        return []
    records = []
    for i, line in enumerate(data.splitlines()):
        if i == 0 and size > MAX_BYTES:
            continue  # cut in the middle
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            records.append(rec)
    return records


def curves(records: Iterable[Mapping[str, Any]], event: str = "step") -> dict[str, list[tuple[int, float]]]:
    """Field -> [(step, value)] of one event's numeric fields, steps increasing."""
    points: dict[str, dict[int, float]] = {}
    for rec in records:
        step = rec.get("step")
        if isinstance(step, bool) or not isinstance(step, int):
            continue
        if rec.get("event") in POSITIONS:
            for series in points.values():
                for s in [s for s in series if s > step]:
                    del series[s]
        if rec.get("event") != event:
            continue
        for key, value in rec.items():
            if key in ("step", "epoch", "restart", "time") or isinstance(value, bool):
                continue
            if isinstance(value, (int, float)) and math.isfinite(value):
                points.setdefault(key, {})[step] = float(value)
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
    points: dict[int, float] = {}
    for match in LOG_LINE.finditer(text):
        value = float(match.group(2))
        if math.isfinite(value):
            points[int(match.group(1))] = value
    return sorted(points.items())
