"""A job's curves in its directory under `ddpjob run` (local/job_dir.py): the loss line of
the run's summary, from metrics.jsonl or, without one, the event files; `--fresh` forgets
them with the checkpoints."""

from __future__ import annotations

import json

from ddpjob.local import job_dir
from ddpjob_trainer.event_files import EventWriter

STEPS = [{"event": "position", "step": 0}, *({"event": "step", "step": s, "loss": 4.0 / s} for s in (1, 2, 4))]


def test_the_summary_line_reads_the_metrics_or_else_the_event_files(tmp_path):
    assert job_dir.loss_curve(tmp_path) is None  # nothing logged: nothing said
    writer = EventWriter(str(tmp_path / job_dir.TENSORBOARD_DIR))
    for record in STEPS:
        writer.add(record)
    writer.close()
    assert job_dir.loss_curve(tmp_path) == "loss 4 █▃▁ 1 (3 points)"
    (tmp_path / job_dir.CHECKPOINTS_DIR).mkdir()
    (tmp_path / job_dir.CHECKPOINTS_DIR / "metrics.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in [*STEPS, {"event": "step", "step": 8, "loss": 0.5}])
    )
    assert job_dir.loss_curve(tmp_path) == "loss 4 █▄▂▁ 0.5 (4 points)"


def test_fresh_forgets_the_curves_too(tmp_path):
    for d in (job_dir.CHECKPOINTS_DIR, job_dir.TENSORBOARD_DIR):
        (tmp_path / d).mkdir()
        (tmp_path / d / "f").write_text("x")
    job_dir.start_fresh(tmp_path)
    assert not (tmp_path / job_dir.CHECKPOINTS_DIR).exists() and not (tmp_path / job_dir.TENSORBOARD_DIR).exists()
