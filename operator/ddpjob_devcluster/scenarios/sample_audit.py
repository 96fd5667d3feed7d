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
