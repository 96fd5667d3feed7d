"""A job's TensorBoard folders under `ddpjob run` (ddpjob.local.job_dir): a folder per run
from step 0, named by its start; a resumed run goes on in the last one; the summary's
sparkline and `ddpjob plot` read the last run's curve."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from ddpjob.cli.main import main
from ddpjob.local import job_dir
from ddpjob.local.tensorboard_server import command

PNG = b"\x89PNG"
T0 = datetime(2026, 11, 29, 8, 19, 30, tzinfo=UTC)


def write_curve(logdir: Path, losses: list[float]) -> None:
    from ddpjob_trainer.event_files import EventWriter

    writer = EventWriter(str(logdir))
    writer.add({"event": "position", "step": 0})
    for step, loss in enumerate(losses, 1):
        writer.add({"event": "step", "step": step, "loss": loss})
    writer.close()


def test_a_run_from_step_0_gets_a_folder_of_its_own_and_a_resumed_run_the_last_one(tmp_path):
    checkpoints = tmp_path / "checkpoints"
    first = job_dir.tensorboard_run(tmp_path, None, T0)
    assert first == tmp_path / "tensorboard" / "2026-11-29T08-19-30Z"
    first.mkdir(parents=True)
    # Another in the same second, then one later: each its own, in the order they started.
    second = job_dir.tensorboard_run(tmp_path, None, T0)
    assert second.name == "2026-11-29T08-19-30Z-2"
    second.mkdir()
    (tmp_path / "tensorboard" / "2026-11-29T08-19-30Z-10").mkdir()
    (tmp_path / "tensorboard" / "notes").mkdir()  # not a run's folder
    later = job_dir.tensorboard_run(tmp_path, checkpoints, T0.replace(hour=9))
    assert later.name == "2026-11-29T09-19-30Z"  # no checkpoints to resume from: a run of its own
    later.mkdir()
    runs = job_dir.tensorboard_runs(tmp_path / "tensorboard")
    assert [r.name for r in runs] == [
        "2026-11-29T08-19-30Z",
        "2026-11-29T08-19-30Z-2",
        "2026-11-29T08-19-30Z-10",
        "2026-11-29T09-19-30Z",
    ]
    # Checkpoints an earlier run left: this run resumes from them, its curve goes on there.
    checkpoints.mkdir()
    (checkpoints / "ckpt-e00001-s00000008.pt").write_bytes(b"x")
    assert job_dir.tensorboard_run(tmp_path, checkpoints, T0.replace(hour=10)) == later
    assert job_dir.latest_run(tmp_path / "tensorboard") == later
    assert job_dir.latest_run(tmp_path / "nowhere") == tmp_path / "nowhere"  # files of an older release


def test_the_summary_and_plot_read_the_last_runs_curve_alone(tmp_path, monkeypatch, capsys):
    logdir = tmp_path / ".ddpjob" / "twice" / "tensorboard"
    write_curve(logdir / "2026-11-29T08-19-30Z", [3.0, 2.0, 1.0, 0.5])
    write_curve(logdir / "2026-11-29T09-00-00Z", [9.0, 8.0])
    assert job_dir.loss_curve(tmp_path / ".ddpjob" / "twice") == "loss 9 █▁ 8 (2 points)"
    monkeypatch.chdir(tmp_path)
    assert main(["plot", "twice", "-o", "loss.png"]) == 0
    assert (tmp_path / "loss.png").read_bytes().startswith(PNG)
    assert capsys.readouterr().out == "loss.png: 2 loss points of .ddpjob/twice/tensorboard/2026-11-29T09-00-00Z\n"


def test_tensorboard_names_the_runs_after_the_job_and_takes_a_path_with_a_comma_whole(tmp_path):
    assert command(tmp_path / "tb", 6006, "curves")[3:5] == ["--logdir_spec", f"curves:{tmp_path}/tb"]
    assert command(tmp_path / "a,b", 6006, "curves")[3:5] == ["--logdir", f"{tmp_path}/a,b"]
