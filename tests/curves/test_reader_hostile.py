"""ddpjob.curves.reader against what a Pod or a file may hold: a progress line whose numbers
are not numbers is one line of its own, never an exception (`ddpjob describe` failed with
`could not convert string to float: '-'` and showed nothing), and the curves are read in
one linear pass that gives what the forward reading gives."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from ddpjob.cli import logs
from ddpjob.curves import reader
from ddpjob.curves.record import POSITIONS

pytestmark = pytest.mark.timeout(60)

HOSTILE = [
    "[pod-0] epoch 1/2 step 3 loss - acc 0.1",
    "[pod-0] epoch 1/2 step 4 loss 1.2.3 acc 0.1",
    f"[pod-0] epoch 1/2 step {'9' * 5000} loss 0.5 acc 0.1",
    "[pod-0] epoch 1/2 step ５ loss 0.5 acc 0.1",  # noqa: RUF001 - full-width digits: int() takes them, a step is ASCII
    "[pod-0] epoch 1/2 step 6 loss 1e99999999 acc 0.1",
    "[pod-0] epoch 1/2 step 7 loss \x1b[2J acc 0.1",
]


def test_a_progress_line_whose_numbers_are_not_numbers_is_one_line_of_its_own() -> None:
    good = [
        "[pod-0] epoch 1/2 step 2 loss 2.5000 acc 0.5000 100 samples/s",
        "[pod-0] epoch 1/2 step 8 loss nan acc 0.5000 100 samples/s",
        "[pod-0] epoch 2/2 step 10 loss 0.5000 acc 0.9000 100 samples/s",
    ]
    log = "\n".join([good[0], *HOSTILE, *good[1:]])
    points, bad = reader.read_log(log)
    assert points == [(2, 2.5), (10, 0.5)]
    assert reader.from_log(log) == points
    assert len(bad) == len(HOSTILE)
    assert bad[0] == "line 2: loss '-' is not a number: [pod-0] epoch 1/2 step 3 loss - acc 0.1"
    assert bad[1].startswith("line 3: loss '1.2.3' is not a number")
    assert bad[2].startswith("line 4: step '99999999999999999999999…' is not a step number")
    assert bad[3].startswith("line 5: step '５' is not a step number")  # noqa: RUF001 - the full-width five above
    assert bad[4].startswith("line 6: loss '1e99999999' is not a number")
    assert "\x1b" not in bad[5] and "\\x1b[2J" in bad[5]
    assert all("\n" not in said and len(said) < 300 for said in bad)


def test_describes_loss_curve_says_each_bad_line_and_draws_the_rest(monkeypatch, capsys) -> None:
    log = ["epoch 1/2 step 1 loss 2.0 acc 0.1", *HOSTILE, "epoch 1/2 step 2 loss 1.0 acc 0.1"]
    monkeypatch.setattr(logs, "pod_lines", lambda conn, pod, follow, tail: iter(log))
    pods = [{"metadata": {"name": "train-0", "labels": {"ddpjob.io/node-rank": "0"}}}]
    curve = logs.loss_curve(None, pods)  # type: ignore[arg-type]
    assert curve is not None and curve.startswith("loss 2") and "(2 points)" in curve
    err = capsys.readouterr().err.splitlines()
    assert len(err) == logs.BAD_LINES_SHOWN + 1 and err[-1] == "ddpjob: ... and 1 more such lines"
    assert err[0] == (
        "ddpjob: train-0's log, line 2: loss '-' is not a number: [pod-0] epoch 1/2 step 3 loss - acc "
        "0.1: left out of the loss curve"
    )


def forward(records: list[dict[str, Any]], event: str = "step") -> dict[str, list[tuple[int, float]]]:
    """The reading the curves are defined by: forwards, each position record dropping
    every series' points after its step (quadratic; what the reader did, which also kept
    a series all of whose points were dropped, as an empty list)."""
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
    return {key: sorted(series.items()) for key, series in points.items() if series}


@pytest.mark.parametrize("seed", range(20))
def test_one_pass_from_the_end_gives_the_forward_reading(seed: int) -> None:
    rng = random.Random(seed)
    records: list[dict[str, Any]] = []
    step = 0
    for _ in range(rng.randint(0, 400)):
        roll = rng.random()
        if roll < 0.08:
            step = rng.randint(0, step)  # back to a checkpoint
            records.append({"event": rng.choice(POSITIONS), "step": step})
        elif roll < 0.15:
            records.append({"event": "epoch", "step": step, "eval_loss": rng.random()})
        else:
            step += rng.randint(0, 3)  # a step logged twice, by two attempts
            record = {"event": "step", "step": step, "loss": rng.random(), "restart": 0, "time": 1.0}
            if rng.random() < 0.3:
                record["lr"] = rng.choice([0.1, float("nan"), True, "x"])
            records.append(record)
    for event in ("step", "epoch"):
        assert reader.curves(records, event) == forward(records, event)
    assert reader.curves(iter(records)) == forward(records)  # any iterable, read once


def test_numbers_a_float_cannot_hold_are_skipped_not_raised() -> None:
    records = [
        {"event": "step", "step": 1, "loss": 10**400, "lr": 0.5},
        {"event": "step", "step": 10**30, "loss": 1.0},
        {"event": "step", "step": -1, "loss": 1.0},
        {"event": "resume", "step": 10**400},
    ]
    assert reader.curves(records) == {"lr": [(1, 0.5)]}


def test_many_resumes_in_one_pass() -> None:
    """The shape of the benchmark (benchmarks/metrics_reading.py), checked for its result:
    a resume every 10 records, each going back 5 steps."""
    records: list[dict[str, Any]] = []
    step = 0
    for i in range(200_000):
        if i % 10 == 9:
            step -= 5
            records.append({"event": "resume", "step": step})
        else:
            step += 1
            records.append({"event": "step", "step": step, "loss": float(step)})
    curve = reader.curve(records, "loss")
    assert [s for s, _ in curve] == list(range(1, step + 1))
    assert all(value == float(s) for s, value in curve)


def test_a_line_nested_past_the_parsers_depth_is_skipped(tmp_path) -> None:
    path = tmp_path / "metrics.jsonl"
    good = '{"event": "step", "step": 1, "loss": 0.5}'
    path.write_text("\n".join([good, "[" * 100_000, '{"a": 1}, {"b": 2}', "\xff", good.replace("1,", "2,")]) + "\n")
    assert reader.read(path) == [
        {"event": "step", "step": 1, "loss": 0.5},
        {"event": "step", "step": 2, "loss": 0.5},
    ]
