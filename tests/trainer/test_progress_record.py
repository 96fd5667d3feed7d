"""The progress record (ddpjob.progress_record): format, atomic writes, the reader's view."""

import json
import os

import pytest

from ddpjob import progress_record as pr


def test_write_then_read_round_trips(tmp_path):
    path = str(tmp_path / "p" / "progress.json")
    written = pr.write(path, step=120, total_steps=900, epoch=1, total_epochs=3, loss=0.5, samples_per_s=10.0)
    assert pr.read(path) == written and written["step"] == 120 and "time" in written
    # No temporary file is left next to it.
    assert os.listdir(tmp_path / "p") == ["progress.json"]


@pytest.mark.parametrize(
    "record, field",
    [
        ({"total_steps": 3}, "step"),
        ({"step": -1}, "step"),
        ({"step": "3"}, "step"),
        ({"step": True}, "step"),
        ({"step": 1, "loss": "nan"}, "loss"),
        ({"step": 1, "loss": float("nan")}, "loss"),
        ({"step": 1, "samples_per_s": float("inf")}, "samples_per_s"),
        ({"step": 1, "epoch": 1.5}, "epoch"),
        ([1], "object"),
        ({"step": 1, "stage": "napping"}, "stage"),
        ({"step": 1, "stage": 3}, "stage"),
    ],
)
def test_validate_names_the_bad_field(record, field):
    errors = pr.validate(record)
    assert errors and field in errors[0]


def test_bad_record_is_refused_by_write_and_ignored_by_read(tmp_path):
    path = str(tmp_path / "progress.json")
    with pytest.raises(ValueError, match="total_steps"):
        pr.write(path, step=1, total_steps=-5)
    assert not os.path.exists(path)
    (tmp_path / "progress.json").write_text('{"step": 1')  # torn (never from write())
    assert pr.read(path) is None
    (tmp_path / "progress.json").write_text(json.dumps({"step": "x"}))
    assert pr.read(path) is None


def test_tracker_measures_advance_eta_and_heartbeats(tmp_path):
    path = str(tmp_path / "progress.json")
    t = pr.Tracker(started_at=1000.0)
    snap = t.snapshot(path, now=1010.0)
    assert snap["record"] is None and snap["seconds_since_progress"] == 10.0 and snap["eta_seconds"] is None
    pr.write(path, step=10, total_steps=110)
    assert t.snapshot(path, now=1020.0)["seconds_since_progress"] == 0.0
    pr.write(path, step=20, total_steps=110)
    snap = t.snapshot(path, now=1030.0)
    assert snap["eta_seconds"] == 90  # 10 steps per 10 s, 90 to go
    snap = t.snapshot(path, now=1045.0)  # no advance
    assert snap["seconds_since_progress"] == 15.0
    pr.write_heartbeat(path, local_rank=0, rank=2, step=21, step_time=1040.0)
    pr.write_heartbeat(path, local_rank=1, rank=3, step=20, step_time=1030.0)
    ranks = t.snapshot(path, now=1045.0)["ranks"]
    assert ranks["2"]["step"] == 21 and ranks["3"]["step"] == 20 and ranks["3"]["step_age"] == 15.0


def test_summary_and_duration():
    assert pr.summary({"step": 45, "total_steps": 90, "epoch": 1, "total_epochs": 3}) == "epoch 1/3 step 45/90 (50%)"
    assert pr.summary({"step": 7}) == "step 7"
    assert pr.summary({"step": 90, "total_steps": 90, "stage": "saving"}) == "step 90/90 (100%), saving"
    assert pr.summary({"step": 9, "stage": "training"}) == "step 9"


def test_past_the_last_step_is_said_by_the_step_or_the_stage():
    assert pr.past_last_step({"step": 90, "total_steps": 90})
    assert pr.past_last_step({"step": 7, "stage": "exiting"})  # no total known: the stage says it
    assert not pr.past_last_step({"step": 89, "total_steps": 90, "stage": "evaluating"})  # between epochs
    assert not pr.past_last_step({"step": 7}) and not pr.past_last_step(None)
    assert [pr.format_duration(s) for s in (5, 125, 3725, 90000)] == ["5s", "2m05s", "1h02m", "1d1h"]


def test_collective_timeout_comes_from_the_contract():
    import datetime

    from ddpjob_trainer import UsageError, distributed

    assert distributed.collective_timeout({}) is None
    assert distributed.collective_timeout({"DDPJOB_COLLECTIVE_TIMEOUT_SECONDS": "90"}) == datetime.timedelta(seconds=90)
    for bad in ("0", "soon", "-5", "1e9"):
        with pytest.raises(UsageError, match="DDPJOB_COLLECTIVE_TIMEOUT_SECONDS"):
            distributed.collective_timeout({"DDPJOB_COLLECTIVE_TIMEOUT_SECONDS": bad})


def test_the_trainer_leaves_a_diverged_loss_out_instead_of_failing(tmp_path):
    import torch

    from ddpjob_trainer.progress import Progress

    path = str(tmp_path / "progress.json")
    p = Progress(True, None, 0, 1, 2, torch.device("cpu"), progress_file=path, total_steps=10)
    p.publish(1, 3, loss=float("nan"), samples_per_s=100.0)
    record = pr.read(path)
    assert record["step"] == 3 and "loss" not in record and record["samples_per_s"] == 100.0


def test_the_trainer_says_where_it_is_past_its_last_step(tmp_path):
    """The record's stage follows the trainer through its end: evaluating, saving, exiting."""
    from tests.trainer.trainer_helpers import clean_env, train

    path = tmp_path / "progress.json"
    done = train(
        [
            "--model",
            "mlp",
            "--data",
            "synthetic",
            "--epochs",
            "1",
            "--synthetic-size",
            "64",
            "--batch-size",
            "32",
            "--checkpoint-dir",
            str(tmp_path / "ckpt"),
            "--log-every",
            "1",
        ],
        clean_env(DDPJOB_PROGRESS_FILE=str(path)),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    record = pr.read(str(path))
    assert record["stage"] == "exiting" and record["step"] == record["total_steps"] == 2
    assert any(line.startswith("checkpoint ") for line in done.stdout.splitlines())  # it saved first


def test_the_launcher_leaves_the_last_record_as_the_termination_message(tmp_path):
    from ddpjob_trainer.launch import leave_final_record

    progress, log = tmp_path / "progress.json", tmp_path / "termination-log"
    record = pr.write(str(progress), step=32, total_steps=32, epoch=2, total_epochs=2, stage="exiting")
    env = {"DDPJOB_PROGRESS_FILE": str(progress), "DDPJOB_TERMINATION_LOG": str(log)}
    leave_final_record(env)
    assert not log.exists()  # nothing made where no kubelet made the file
    log.write_text("")
    leave_final_record(env)
    assert json.loads(log.read_text()) == record
    leave_final_record({**env, "DDPJOB_PROGRESS_FILE": str(tmp_path / "none.json")})  # no record: left alone
    assert json.loads(log.read_text()) == record


def test_the_epoch_journal_is_whole_lines_of_valid_records_and_bounded(tmp_path, monkeypatch):
    path = str(tmp_path / "progress.json")
    for step, epoch in ((1, 1), (2, 1), (3, 2), (4, 2), (5, None), (6, 3)):
        pr.write(path, step=step, epoch=epoch)
    records, offset = pr.read_epochs(path, 0)
    assert [(r["step"], r["epoch"]) for r in records] == [(2, 1), (4, 2)]  # the last of each
    with open(path + pr.EPOCHS_SUFFIX, "ab") as f:  # a foreign line, then half of one
        f.write(b'{"step": "x"}\n{"step": 9, "epo')
    more, after = pr.read_epochs(path, offset)
    assert more == [] and after == offset + len(b'{"step": "x"}\n')  # the half line waits
    monkeypatch.setattr(pr, "EPOCHS_MAX_BYTES", os.path.getsize(path + pr.EPOCHS_SUFFIX))
    pr.write(path, step=7, epoch=4)
    pr.write(path, step=8, epoch=5)
    assert pr.read_epochs(path, after)[0] == []  # full: no more lines
