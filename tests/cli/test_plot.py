"""`ddpjob plot`: a job's loss and throughput as a PNG, from its metrics.jsonl."""

from __future__ import annotations

import json

from ddpjob.cli.main import main

PNG = b"\x89PNG\r\n\x1a\n"


def write_log(path, records) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


LOG = [
    {"event": "position", "step": 0},
    *({"event": "step", "step": s, "loss": 2.0 / s, "samples_per_s": 900.0 + s} for s in range(1, 31)),
    {"event": "epoch", "step": 30, "eval_loss": 0.2},
    {"event": "resume", "step": 20},
    {"event": "position", "step": 20},
    *({"event": "step", "step": s, "loss": 1.0 / s, "samples_per_s": 800.0} for s in range(21, 41)),
]


def test_a_job_run_here_is_plotted_by_its_name(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_log(tmp_path / ".ddpjob" / "mnist-cpu" / "checkpoints" / "metrics.jsonl", LOG)
    assert main(["plot", "mnist-cpu", "-o", "loss.png"]) == 0
    picture = (tmp_path / "loss.png").read_bytes()
    assert picture.startswith(PNG) and len(picture) > 10_000  # a drawing, not an empty canvas
    # 20 steps of the first attempt, then the 20 the resumed one logged: one curve, no step twice
    assert capsys.readouterr().out.startswith("loss.png: 40 loss points of .ddpjob/mnist-cpu/checkpoints/metrics.jsonl")


def test_a_metrics_file_or_a_workdir(tmp_path, capsys):
    write_log(tmp_path / "w" / "checkpoints" / "metrics.jsonl", LOG)
    assert main(["plot", str(tmp_path / "w" / "checkpoints" / "metrics.jsonl"), "-o", str(tmp_path / "a.png")]) == 0
    assert main(["plot", "job", "--workdir", str(tmp_path / "w"), "-o", str(tmp_path / "b.png")]) == 0
    assert (tmp_path / "a.png").read_bytes().startswith(PNG) and (tmp_path / "b.png").read_bytes().startswith(PNG)


def test_nothing_to_plot_names_what_was_looked_for(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["plot", "nojob", "-o", "x.png"]) == 1
    err = capsys.readouterr().err
    assert "error: JOB 'nojob': no metrics.jsonl or tensorboard/ directory in .ddpjob/nojob" in err
    write_log(tmp_path / "empty" / "metrics.jsonl", [{"event": "start", "world_size": 2}])
    assert main(["plot", "empty", "-o", "x.png"]) == 1
    assert "empty: no training loss logged yet (in empty/metrics.jsonl or empty/tensorboard)" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


def test_a_job_without_a_metrics_file_is_plotted_from_its_event_files(tmp_path, monkeypatch, capsys):
    """`ddpjob run` of a job without spec.checkpoint: only ./.ddpjob/<name>/tensorboard."""
    from ddpjob_trainer.event_files import EventWriter

    monkeypatch.chdir(tmp_path)
    resume = next(i for i, r in enumerate(LOG) if r["event"] == "resume")
    for attempt in (LOG[:resume], LOG[resume:]):  # each attempt's trainer has its own writer
        writer = EventWriter(str(tmp_path / ".ddpjob" / "mnist-cpu" / "tensorboard"))
        for record in attempt:
            writer.add(record)
        writer.close()
    assert main(["plot", "mnist-cpu", "-o", "loss.png"]) == 0
    assert (tmp_path / "loss.png").read_bytes().startswith(PNG)
    assert capsys.readouterr().out == "loss.png: 40 loss points of .ddpjob/mnist-cpu/tensorboard\n"


def test_a_long_curve_is_drawn_by_its_lows_and_highs() -> None:
    from ddpjob.curves.plot import MAX_POINTS, thin

    points = [(s, 1.0) for s in range(100_000)]
    points[54_321] = (54_321, 9.0)  # a spike
    points[77_777] = (77_777, -3.0)  # a dip
    kept = thin(points)
    assert len(kept) <= MAX_POINTS and (54_321, 9.0) in kept and (77_777, -3.0) in kept
    assert [s for s, _ in kept] == sorted(s for s, _ in kept) and kept[0][0] == 0
    assert thin(points[:100]) == points[:100]


def test_a_file_of_many_resumes_draws_its_last_marks(tmp_path, capsys) -> None:
    """A resume record every other line (a hostile or broken file) once drew a line for
    each, and read the file in time that grew with the square of its resumes."""
    from ddpjob.curves.plot import MAX_MARKS, positions

    records = [{"event": "position", "step": 0}]
    for s in range(1, 20_001):
        records += [{"event": "step", "step": s, "loss": 1.0 / s}, {"event": "resume", "step": s}]
    records.append({"event": "resume", "step": True})  # not a step
    write_log(tmp_path / "metrics.jsonl", records)
    marks = positions(records)
    assert len(marks) == MAX_MARKS and marks[-1] == (20_000, "resume")
    assert main(["plot", str(tmp_path / "metrics.jsonl"), "-o", str(tmp_path / "loss.png")]) == 0
    assert (tmp_path / "loss.png").read_bytes().startswith(PNG)
    assert "20000 loss points" in capsys.readouterr().out
