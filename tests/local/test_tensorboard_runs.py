"""`ddpjob run`'s curves, run after run: each run of a job from step 0 is a TensorBoard
run of its own (a folder named by its start), so two runs never mix, and a run that
resumes from an earlier one's checkpoints goes on with that run's curve; `--tensorboard`
keeps serving once the job is over, until Ctrl-C, saying so."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from ddpjob.curves import reader
from ddpjob.local import job_dir
from tests.support.deadlines import PHASE, RUN

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2 * RUN)]
TRAIN = ["ddpjob-train", "--synthetic-size", "256", "--batch-size", "32", "--log-every", "1", "--epochs", "1"]


def job_file(tmp_path: Path, name: str, checkpoint: bool = False, **spec) -> Path:
    body = {
        "nodes": 1,
        "nprocPerNode": 1,
        "backend": "gloo",
        "image": "local",
        "command": ["ddpjob-launch"],
        "args": TRAIN,
        "restartBackoffSeconds": 0,
        **spec,
    }
    if checkpoint:
        body["checkpoint"] = {"claimName": "c"}
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        yaml.safe_dump({"apiVersion": "ddpjob.io/v1alpha1", "kind": "DDPJob", "metadata": {"name": name}, "spec": body})
    )
    return path


def ddpjob_run(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "ddpjob.cli", "run", *argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=RUN,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "-1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def steps_in(run: Path) -> list[int]:
    return [s for s, _ in reader.from_event_files(run).get("loss", [])]


def test_each_run_from_step_0_is_a_run_of_its_own_and_a_resumed_one_goes_on_with_its_curve(tmp_path):
    job = job_file(tmp_path, "twice")  # no checkpoint: every run starts at step 0
    first = ddpjob_run(tmp_path, str(job))
    second = ddpjob_run(tmp_path, str(job))
    runs = job_dir.tensorboard_runs(tmp_path / ".ddpjob" / "twice" / "tensorboard")
    assert len(runs) == 2 and all(job_dir.RUN_NAME.fullmatch(r.name) for r in runs), runs
    # Each its own 8 steps; before, the second run's files went beside the first's, and
    # TensorBoard purged the first's points ("Detected out of order event.step").
    assert steps_in(runs[0]) == steps_in(runs[1]) == list(range(1, 9))
    for done in (first, second):
        assert "Detected out of order" not in done.stdout + done.stderr
        assert re.search(r"^\[ddpjob\] loss \S+ [▁-█]+ \S+ \(8 points\)$", done.stdout, re.M), done.stdout

    # A job with checkpoints: its second run resumes and trains one epoch more, in the same run.
    resumed = job_file(tmp_path, "resumed", checkpoint=True)
    ddpjob_run(tmp_path, str(resumed))
    ddpjob_run(tmp_path, str(job_file(tmp_path, "resumed", checkpoint=True, args=[*TRAIN[:-1], "2"])))
    (run,) = job_dir.tensorboard_runs(tmp_path / ".ddpjob" / "resumed" / "tensorboard")
    assert steps_in(run) == list(range(1, 17))


def test_tensorboard_keeps_serving_the_curves_once_the_job_is_over_until_ctrl_c(tmp_path):
    job = job_file(tmp_path, "shown")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ddpjob.cli", "run", "--tensorboard", str(job)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "-1"},
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        said = re.compile(
            r"^\[ddpjob\] the job is over; TensorBoard keeps serving its curves at "
            r"(http://127\.0\.0\.1:\d+/)(\S*) until Ctrl-C$"
        )
        deadline = time.monotonic() + RUN
        while not (found := next((m for line in lines if (m := said.match(line.rstrip("\n")))), None)):
            assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)
            time.sleep(0.5)
        url, page = found.groups()
        # It opens on the loss curve: its card pinned.
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(page).query)
        assert json.loads(query["pinnedCards"][0]) == [{"plugin": "scalars", "tag": "train/loss"}], page
        assert page.endswith("#timeseries")
        (run,) = job_dir.tensorboard_runs(tmp_path / ".ddpjob" / "shown" / "tensorboard")
        assert any(f"this run as shown/{run.name}; it serves until Ctrl-C" in line for line in lines), lines
        # The job is over (its status printed), and the page still answers with its run.
        assert any(line.startswith("[ddpjob] Succeeded in ") for line in lines), lines
        end = time.monotonic() + PHASE
        while True:
            with urllib.request.urlopen(url + "data/runs", timeout=10) as answer:
                runs = json.load(answer)
            if runs:
                break
            assert time.monotonic() < end, "TensorBoard shows no run"
            time.sleep(1)
        assert runs == [f"shown/{run.name}"]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(PHASE) == 0  # the job's own code: it had Succeeded
        with pytest.raises(OSError):  # TensorBoard went with it
            urllib.request.urlopen(url, timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(10)
