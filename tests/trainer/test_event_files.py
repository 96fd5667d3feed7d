"""TensorBoard event files of the built-in trainer, read back with TensorBoard's own reader
(EventAccumulator) and held point by point to metrics.jsonl, through a resume that trains
steps an earlier attempt had already logged (no step twice, none missing)."""

from __future__ import annotations

import pathlib

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from ddpjob.curves import reader, record
from ddpjob_trainer import checkpoint, event_files
from ddpjob_trainer.train import main
from tests.trainer.trainer_helpers import CONTRACT

FAST = ["--synthetic-size", "256", "--batch-size", "32", "--log-every", "3"]
# metrics.jsonl field -> tag, per event (ddpjob.curves.record.TAGS), as the test names them.
STEP_TAGS = {
    "loss": "train/loss",
    "accuracy": "train/accuracy",
    "lr": "train/lr",
    "samples_per_s": "train/samples_per_s",
}
EPOCH_TAGS = {"eval_loss": "eval/loss", "eval_accuracy": "eval/accuracy", "loss": "epoch/loss"}


@pytest.fixture(autouse=True)
def no_contract(monkeypatch):
    for name in (*CONTRACT, "DDPJOB_TENSORBOARD_DIR"):
        monkeypatch.delenv(name, raising=False)


def scalars(logdir) -> EventAccumulator:
    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return acc


def points(acc: EventAccumulator, tag: str) -> list[tuple[int, float]]:
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def test_a_resumed_run_draws_one_curve_that_matches_metrics_jsonl(tmp_path):
    ckpt = tmp_path / "ckpt"
    assert main(["--epochs", "2", "--checkpoint-dir", str(ckpt), *FAST]) == 0
    # The epoch 2 checkpoint is lost: the next attempt resumes from epoch 1 and trains
    # epoch 2's steps again (their samples/s differ), then a third epoch.
    pathlib.Path(checkpoint.candidates(str(ckpt))[0][1]).unlink()
    assert main(["--epochs", "3", "--checkpoint-dir", str(ckpt), *FAST]) == 0
    records = reader.read(ckpt / "metrics.jsonl")
    resumed = [r["step"] for r in records if r["event"] == "resume"]
    first_run = [r["step"] for r in records if r["event"] == "step" and r["restart"] == 0]
    assert resumed and max(first_run) > resumed[0], "the test needs steps logged past the checkpoint"

    acc = scalars(ckpt / record.SUBDIR)
    for event, tags in (("step", STEP_TAGS), ("epoch", EPOCH_TAGS)):
        for key, tag in tags.items():
            want = reader.curve(records, key, event)
            got = points(acc, tag)
            assert want, f"metrics.jsonl has no {key} in its {event} records"
            assert [s for s, _ in got] == [s for s, _ in want], tag  # the same steps: no gap, no repeat
            # float32 in the event file: each value as metrics.jsonl has it, to 1e-6
            assert [v for _, v in got] == pytest.approx([v for _, v in want], rel=1e-6), tag
    assert {v for _, v in reader.curve(records, "lr")} == {1e-3}  # the optimizer's rate, --lr's default
    steps = [s for s, _ in points(acc, "train/loss")]
    assert steps == sorted(set(steps)) and steps[-1] == 24  # 3 epochs x 8 steps
    # The resume is marked at its step: text, and the attempt as a scalar.
    assert points(acc, "job/restarts")[-1][0] == resumed[0]
    texts = [(e.step, e.tensor_proto.string_val[0].decode()) for e in acc.Tensors("job/events")]
    checkpoint_name = [r for r in records if r["event"] == "resume"][-1]["checkpoint"]
    assert (resumed[0], f"resumed from step {resumed[0]} ({checkpoint_name})") in texts


def test_the_writer_purges_steps_an_earlier_attempt_logged_past_the_resume(tmp_path):
    """The purge itself, without training: without TensorBoard's restart mark the second
    attempt's steps 30 and 40 would be drawn twice."""
    logdir = tmp_path / "tb"
    first = event_files.EventWriter(str(logdir))
    log = [{"event": "start", "world_size": 4, "restart": 0}, {"event": "position", "step": 0}]
    log += [{"event": "step", "step": s, "loss": 10.0 - s / 10} for s in (10, 20, 30, 40)]
    for r in log:
        first.add(r)
    first.close()
    second = event_files.EventWriter(str(logdir), restart=1)
    again = [{"event": "start", "world_size": 2, "restart": 1}, {"event": "resume", "step": 20, "checkpoint": "c"}]
    again += [{"event": "position", "step": 20}]
    again += [{"event": "step", "step": s, "loss": 100.0 + s} for s in (30, 40, 50)]
    for r in again:
        second.add(r)
    second.close()
    acc = scalars(logdir)
    want = [(10, 9.0), (20, 8.0), (30, 130.0), (40, 140.0), (50, 150.0)]
    assert points(acc, "train/loss") == want == reader.curve(log + again, "loss")  # exact in float32
    assert points(acc, "job/world_size") == [(0, 4.0), (20, 2.0)]


def test_no_directory_no_writer(tmp_path):
    assert event_files.EventWriter.open(None) is None
    assert event_files.directory(str(tmp_path), {}) == str(tmp_path / "tensorboard")
    assert event_files.directory(None, {"DDPJOB_TENSORBOARD_DIR": "/x/tb"}) == "/x/tb"
    # In a Pod: a folder named after the job, which its TensorBoard shows as the run's name
    # (`.` when the files lay in the folder TensorBoard reads).
    assert event_files.directory("/ckpt", {"DDPJOB_NAME": "mnist-curves"}) == "/ckpt/tensorboard/mnist-curves"
    for hostile in ("../../etc", "a/b", "", "UPPER", "x" * 300):
        assert event_files.directory("/ckpt", {"DDPJOB_NAME": hostile}) == "/ckpt/tensorboard"


def test_the_progress_line_of_a_pods_log_reads_back_as_the_loss_curve(capsys):
    """`ddpjob describe` of a cluster job reads ddpjob-train's progress lines in Pod 0's log."""
    import torch

    from ddpjob_trainer.progress import Progress

    p = Progress(True, None, 0, 2, 3, torch.device("cpu"))
    for step, loss in ((2, 2.5), (4, 1.25), (6, float("nan")), (8, 0.5)):
        p.step(1, step, loss, 0.5, 1000.0)
    log = "\n".join(f"[pod-0] {line}" for line in capsys.readouterr().out.splitlines())
    assert reader.from_log(log + "\nepoch 1/3 step 10 loss 0.1 and more") == [(2, 2.5), (4, 1.25), (8, 0.5)]
