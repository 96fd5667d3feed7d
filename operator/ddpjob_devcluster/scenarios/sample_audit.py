"""The exactly-once audit of the trainer's sample log (`ddpjob-train --sample-log DIR`,
written by ddpjob_trainer.sample_log). Pure: the benchmark and the cluster tests read
the log without torch.

Each process group writes one file per rank, `samples-<gen>-r<rank>.jsonl`: a header
`{"gen", "start_step", "world", "t"}` (the group's id, the step it resumed at, its size,
the time) and one line `{"epoch", "step", "idx", "t"}` per micro-batch (`step`: the
optimizer step it is part of). A group that resumes at step s undoes what earlier groups
did after s (their updates were lost with them: the model came back from the checkpoint
at s), so the steps that count are, for each step, those of the last group that made it.
`audit` counts, per epoch, how often each sample was in a step that counts.
"""

from __future__ import annotations

import glob
import json
import os
from collections import Counter


def worlds(directory: str) -> list[int]:
    """The size of each group that trained, in time order."""
    return [header["world"] for _, (_, _, header) in sorted(_read(directory).items())]


def groups(directory: str) -> list[tuple[int, float | None]]:
    """(world size, time of its first step) of each group, in time order."""
    out = []
    for _, (_, entries, header) in sorted(_read(directory).items()):
        out.append((header["world"], min((e["t"] for e in entries if "t" in e), default=None)))
    return out


def spans(directory: str) -> list[tuple[int, float, float]]:
    """(world size, time of its first step, of its last) of each group that stepped, in time order."""
    out = []
    for _, (_, entries, header) in sorted(_read(directory).items()):
        times = [e["t"] for e in entries if "t" in e]
        if times:
            out.append((header["world"], min(times), max(times)))
    return out


def step_times(directory: str) -> list[tuple[int, list[float]]]:
    """(world size, when each of its steps started: its first rank's entry) of each group
    that stepped, in time order: a step's end is the next one's start."""
    out = []
    for _, (_, entries, header) in sorted(_read(directory).items()):
        first: dict[int, float] = {}
        for e in entries:
            if "t" in e and "step" in e:
                first[e["step"]] = min(e["t"], first.get(e["step"], e["t"]))
        if first:
            out.append((header["world"], sorted(first.values())))
    return out


def healed(groups: list[tuple[int, list[float]]], at: float) -> tuple[int, float] | None:
    """The heal clock of a disruption at `at` (scenarios/heal.py, benchmarks/in_place_resize.py):
    the size of the first group of `groups` (step_times) that stepped after it, and when its
    first optimizer step ended (the next step's start, a later group's if it made one step);
    None until then."""
    for i, (world, times) in enumerate(groups):
        if times[0] > at:
            ends = times[1:] + [later[0] for _, later in groups[i + 1 :]]
            return (world, ends[0]) if ends else None
    return None


def last_epoch(directory: str) -> int:
    """The epoch the last group that stepped was in at its last step (0: none): every
    earlier epoch is finished, whatever groups before it did (it resumed after them)."""
    last = 0
    for _, (_, entries, _) in sorted(_read(directory).items()):
        epochs = [e["epoch"] for e in entries if "epoch" in e]
        last = max(epochs) if epochs else last
    return last


def _groups(directory: str) -> dict[int, tuple[int, list[dict]]]:
    return {gen: (start, entries) for gen, (start, entries, _) in _read(directory).items()}


def _read(directory: str) -> dict[int, tuple[int, list[dict], dict]]:
    groups: dict[int, tuple[int, list[dict], dict]] = {}
    for path in sorted(glob.glob(os.path.join(directory, "samples-*-r*.jsonl"))):
        with open(path, encoding="utf-8") as f:
            lines = [record for record in map(_record, f) if record is not None]
        if not lines or "gen" not in lines[0]:
            continue
        header = lines[0]
        start, entries, _ = groups.get(header["gen"], (header["start_step"], [], header))
        groups[header["gen"]] = (start, entries + lines[1:], header)
    return groups


def _record(line: str) -> dict | None:
    try:
        record = json.loads(line)
    except ValueError:  # the last line of a process killed while writing it: no step
        return None
    return record if isinstance(record, dict) else None


def audit(directory: str) -> dict[int, Counter]:
    """epoch -> how many counted steps each sample was in."""
    counted: dict[int, list[dict]] = {}  # step -> its entries (every rank's)
    for _, (start, entries) in sorted(_groups(directory).items()):
        counted = {s: e for s, e in counted.items() if s <= start}
        mine: dict[int, list[dict]] = {}
        for entry in entries:
            mine.setdefault(entry["step"], []).append(entry)
        counted.update(mine)
    seen: dict[int, Counter] = {}
    for entries in counted.values():
        for entry in entries:
            seen.setdefault(entry["epoch"], Counter()).update(entry["idx"])
    return seen


def lost_and_repeated(directory: str, size: int, epochs: int) -> tuple[int, int]:
    """Samples never trained on in an epoch, and extra times one was (goal: 0 and 0)."""
    seen = audit(directory)
    lost = repeated = 0
    for epoch in range(1, epochs + 1):
        counts = seen.get(epoch, Counter())
        lost += sum(1 for i in range(size) if counts[i] == 0)
        repeated += sum(c - 1 for c in counts.values() if c > 1)
    return lost, repeated
