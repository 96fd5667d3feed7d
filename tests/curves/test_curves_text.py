"""The metrics log read back as curves (ddpjob.curves.reader) and drawn as one line of text
(ddpjob.curves.sparkline): what `ddpjob run`'s summary and `ddpjob plot` show."""

from __future__ import annotations

import json

from ddpjob.curves import reader, sparkline


def test_a_resume_replaces_what_an_earlier_attempt_logged_after_its_step():
    records = [
        {"event": "position", "step": 0},
        *({"event": "step", "step": s, "loss": 1.0, "restart": 0} for s in (10, 20, 30, 40)),
        {"event": "resume", "step": 20},  # the attempt that died had logged 30 and 40
        {"event": "position", "step": 20},
        {"event": "step", "step": 30, "loss": 0.5, "restart": 1},
        {"event": "resize", "step": 30, "world_size": 2},
        {"event": "step", "step": 35, "loss": 0.25, "restart": 1},
    ]
    assert reader.curve(records, "loss") == [(10, 1.0), (20, 1.0), (30, 0.5), (35, 0.25)]
    # Without the positions, step 40 of the lost attempt would stay: a curve that jumps back.
    plain = [r for r in records if r["event"] == "step"]
    assert reader.curve(plain, "loss")[-1] == (40, 1.0)


def test_only_numbers_of_the_event_asked_for():
    records = [
        {"event": "epoch", "step": 8, "eval_loss": 2.0, "ok": True, "name": "x", "nan": float("nan")},
        {"event": "step", "step": 8, "loss": 3.0},
        {"event": "step", "step": "9", "loss": 1.0},
    ]
    assert reader.curves(records, "epoch") == {"eval_loss": [(8, 2.0)]}
    assert reader.curves(records) == {"loss": [(8, 3.0)]}


def test_read_skips_torn_and_foreign_lines(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps({"event": "step", "step": 1, "loss": 2.0}) + "\n[1]\nnot json\n" + '{"event": "st')
    assert reader.read(path) == [{"event": "step", "step": 1, "loss": 2.0}]
    assert reader.read(tmp_path / "none.jsonl") == []


def test_a_falling_curve_falls_and_the_ends_are_written_out():
    values = [2.0 - i * 0.02 for i in range(100)]
    # 100 points in 8 buckets of their means, each one of 8 heights; first and last written out
    assert sparkline.line("loss", values, width=8) == "loss 2 █▇▆▅▄▃▂▁ 0.02 (100 points)"


def test_short_flat_and_empty_curves():
    assert sparkline.spark([1.0, 2.0, 3.0], width=8) == "▁▅█"
    assert sparkline.spark([0.5, 0.5]) == "▅▅"
    assert sparkline.line("loss", [0.5]) == "loss 0.5 ▅ 0.5 (1 point)"
    assert sparkline.line("loss", [float("nan")]) is None
    assert sparkline.line("loss", []) is None
