"""The examples a new user copies: bring your own image (a Dockerfile of three lines FROM
the trainer image, and a job that runs its script) and the one-GPU starter."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml

from ddpjob import version
from ddpjob.api.spec import parse_job
from ddpjob.render.objects import render
from tests.support.deadlines import RUN

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "manifests" / "examples"
MY_SCRIPT = EXAMPLES / "my-script"


def load(name: str) -> dict:
    return yaml.safe_load((EXAMPLES / name).read_text())


def test_the_dockerfile_is_three_lines_from_this_releases_trainer_image_and_the_job_runs_what_it_copies() -> None:
    lines = [line for line in (MY_SCRIPT / "Dockerfile").read_text().splitlines() if line.strip()]
    assert len(lines) == 3 and lines[0] == f"FROM {version.image_tags()['trainer-cpu']}", lines
    copied = lines[1].split()
    assert copied[0] == "COPY" and all((MY_SCRIPT / f).is_file() for f in copied[1:-1]), copied
    job = parse_job(load("my-script.yaml"))
    assert job.command == ("ddpjob-launch",) and job.args[0] == copied[-1] + "train.py"
    hadolint = shutil.which("hadolint", path=os.path.dirname(sys.executable))
    if hadolint:  # the same linter as the project's Dockerfile
        done = subprocess.run([hadolint, str(MY_SCRIPT / "Dockerfile")], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
@pytest.mark.timeout(RUN)
def test_the_script_of_the_image_trains_under_ddpjob_run(tmp_path: pathlib.Path) -> None:
    """The job as written, its script where the image puts it replaced by the file here."""
    body = load("my-script.yaml")
    body["spec"]["args"][0] = str(MY_SCRIPT / "train.py")
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(body))
    done = subprocess.run(
        [sys.executable, "-m", "ddpjob.cli", "run", "job.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=RUN,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "[my-script-0] epoch 2/2 step" in done.stdout, done.stdout[-3000:]
    status = yaml.safe_load((tmp_path / ".ddpjob" / "my-script" / "status.yaml").read_text())["status"]
    assert status["phase"] == "Succeeded" and status["worldSize"] == 4, status
    # The script's progress record, as the operator would show it.
    assert status["progress"]["summary"] == "epoch 2/2 step 16/16 (100%)", status["progress"]


def test_the_gpu_starter_is_one_pod_with_one_gpu_on_nccl() -> None:
    job = parse_job(load("gpu-starter.yaml"))
    assert (job.nodes, job.gpus_per_node, job.nproc_per_node, job.backend) == (1, 1, 1, "nccl")
    pod = [o for o in render(job) if o["kind"] == "Pod"]
    assert len(pod) == 1
    limits = pod[0]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == 1 and job.image == version.image_tags()["trainer-cuda"]
