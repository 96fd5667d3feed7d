"""`ddpjob run` looks for the script a job runs before it starts anything: a path of the
job's image (the my-script example's /app/train.py) is said at once, with the copy beside
the job file, instead of by every process (under plain torchrun, after a minute of
rendezvous retries)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ddpjob.api.spec import parse_job
from ddpjob.local.program import missing_script, script_word

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "words, index",
    [
        (["ddpjob-launch", "/app/train.py", "--epochs", "2"], 1),
        (["ddpjob-launch", "--resize", "in-place", "--dns-timeout=9", "/app/train.py"], 4),
        (["ddpjob-launch", "ddpjob-train", "--epochs", "1"], None),  # the built-in trainer: no script
        (["ddpjob-launch", "-m", "mypkg.train"], None),
        (["python", "-u", "-W", "ignore", "train.py", "--lr", "0.1"], 4),
        (["python3.11", "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node=4", "a/train.py", "b.py"], 6),
        (["python", "-c", "print(1)"], None),
        (["python", "-m", "mypkg"], None),
        (["/usr/bin/torchrun", "--standalone", "--nproc_per_node", "2", "train.py", "--config", "c.py"], 4),
        (["sh", "-c", "python train.py"], None),
        ([], None),
    ],
)
def test_the_script_is_the_word_the_launcher_or_interpreter_runs(words, index):
    assert script_word(words) == index


def job(tmp_path: Path, **spec) -> dict:
    body = {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {"name": "mine"},
        "spec": {"nodes": 2, "image": "mine:1", "command": ["ddpjob-launch"], **spec},
    }
    return body


def test_a_missing_script_names_its_field_and_the_copy_beside_the_job_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "train.py").write_text("print('hi')\n")
    found = missing_script(parse_job(job(tmp_path, args=["/app/train.py", "--epochs", "2"])), str(tmp_path / "j.yaml"))
    assert (found.path, found.message) == (
        "spec.args[0]",
        "script '/app/train.py' is not on this machine: `ddpjob run` runs the command here, not in "
        f"the job's image; give the local copy ({tmp_path}/mine/train.py)",
    )
    # Relative to where the command runs; present, nothing to say.
    assert missing_script(parse_job(job(tmp_path, args=["mine/train.py"])), "-") is None
    plain = missing_script(parse_job(job(tmp_path, command=["torchrun", "--nnodes=2", "/opt/x.py"])), "-")
    assert plain.path == "spec.command[2]" and plain.message.endswith("give its path here")


def test_ddpjob_run_of_the_my_script_example_says_it_at_once(monkeypatch):
    example = ROOT / "manifests" / "examples" / "my-script.yaml"
    done = subprocess.run(
        [sys.executable, "-m", "ddpjob.cli", "run", str(example)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"{example}: spec.args[0]: script '/app/train.py' is not on this machine: `ddpjob run` runs the command "
        f"here, not in the job's image; give the local copy ({example.parent}/my-script/train.py)"
    ]
    # The example's own words say how: its args pointed at the copy here.
    said = [line for line in example.read_text().splitlines() if "| ddpjob run -f -" in line]
    assert len(said) == 1 and "sed 's#/app/train.py#manifests/examples/my-script/train.py#'" in said[0]
    pointed = yaml.safe_load(example.read_text().replace("/app/train.py", "manifests/examples/my-script/train.py"))
    monkeypatch.chdir(ROOT)  # where the line is run from
    assert missing_script(parse_job(pointed), "-") is None
