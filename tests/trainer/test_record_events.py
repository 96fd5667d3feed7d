"""A user's own program that writes the progress record (the README's recipe) gets its
loss curve in TensorBoard: ddpjob-launch follows the records into event files."""

from __future__ import annotations

import time

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from ddpjob import progress_record
from ddpjob.local.ports import free_port
from ddpjob_trainer import record_events
from ddpjob_trainer.event_files import EventWriter
from tests.trainer.trainer_helpers import contract, launch

SCRIPT = """
import json, os, tempfile, time
path = os.environ["DDPJOB_PROGRESS_FILE"]
for step in range(1, 4):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))
    with os.fdopen(fd, "w") as f:
        json.dump({"step": step, "total_steps": 3, "loss": 3.0 - step, "samples_per_s": 100.0 * step}, f)
    os.replace(tmp, path)
    time.sleep(0.3)
"""


def loss_points(logdir) -> list[tuple[int, float]]:
    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0})
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars("train/loss")] if "train/loss" in acc.Tags()["scalars"] else []


def test_each_new_step_of_the_record_is_a_point_and_a_new_attempt_takes_over(tmp_path):
    record, logdir = str(tmp_path / "progress.json"), tmp_path / "tb"
    follower = record_events.RecordFollower(record, EventWriter(str(logdir)))
    follower.poll()  # no record yet: nothing
    for step, loss in ((5, 2.0), (5, 2.0), (9, 1.0), (12, 0.5)):
        progress_record.write(record, step=step, loss=loss)
        follower.poll()
    follower.stop()
    assert loss_points(logdir) == [(5, 2.0), (9, 1.0), (12, 0.5)]
    # The next attempt resumed at step 8: its first record (step 10) takes over from there.
    # Attempts are processes seconds apart, and readers take the event files in name order:
    # the start second, then (one process, one second) a writer counter compared as text, so
    # that writers 9 and 10 of a test worker would be read the wrong way round.
    time.sleep(1.05 - time.time() % 1)
    again = record_events.RecordFollower(record, EventWriter(str(logdir), restart=1))
    progress_record.write(record, step=10, loss=0.75)
    again.poll()
    again.stop()
    assert loss_points(logdir) == [(5, 2.0), (9, 1.0), (10, 0.75)]


def test_ddpjob_train_writes_its_own(tmp_path):
    env = {"DDPJOB_PROGRESS_FILE": str(tmp_path / "p.json"), "DDPJOB_CHECKPOINT_DIR": str(tmp_path)}
    assert record_events.follow(["ddpjob-train", "--epochs", "1"], env) is None
    assert record_events.follow(["-m", "ddpjob_trainer.train"], env) is None
    assert record_events.follow(["python", "x.py"], {"DDPJOB_CHECKPOINT_DIR": str(tmp_path)}) is None  # no record
    assert record_events.follow(["python", "x.py"], {"DDPJOB_PROGRESS_FILE": str(tmp_path / "p.json")}) is None


def test_a_script_run_by_ddpjob_launch_gets_its_loss_curve(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    (tmp_path / "run").mkdir()
    env = contract(
        nproc=2,
        DDPJOB_PROGRESS_FILE=tmp_path / "run" / "progress.json",
        DDPJOB_PROGRESS_PORT=free_port(),
        DDPJOB_PROGRESS_HOST="127.0.0.1",
        DDPJOB_CHECKPOINT_DIR=tmp_path / "ckpt",
    )
    done = launch([str(script)], env)
    assert done.returncode == 0, done.stderr
    points = loss_points(tmp_path / "ckpt" / "tensorboard")
    # A sample of the steps (a poll a second), in order, always with the last one.
    assert points and points[-1] == (3, 0.0), points
    assert set(points) <= {(1, 2.0), (2, 1.0), (3, 0.0)} and points == sorted(points)


def test_every_epoch_is_a_point_however_short_while_steps_are_sampled(tmp_path):
    """A program that ends its epochs faster than a poll (the my-script example: two epochs
    in well under a second) still gets a point for each: the record's epoch journal."""
    record, logdir = str(tmp_path / "progress.json"), tmp_path / "tb"
    follower = record_events.RecordFollower(record, EventWriter(str(logdir)))
    for epoch in (1, 2, 3):
        for step in range(4 * epoch - 3, 4 * epoch + 1):
            progress_record.write(record, step=step, epoch=epoch, total_epochs=3, loss=10.0 - step)
    follower.stop()  # its only read: the end of the program
    assert loss_points(logdir) == [(4, 6.0), (8, 2.0), (12, -2.0)]
    # The journal holds an epoch's last record, a line each.
    assert [r["step"] for r in progress_record.read_epochs(record, 0)[0]] == [4, 8]
