"""`ddpjob run` runs an elastic job as the operator does, with the same plan: one node's
processes killed mid-epoch, the others keep training at the smaller size (no gang
restart), the lost node comes back after the restart backoff and the group grows back;
the job succeeds with every sample trained on exactly once per epoch. Node 0, which hosts
the rendezvous store, is lost the same way: the survivors rejoin its replacement."""

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from ddpjob_devcluster.scenarios import sample_audit

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SIZE, EPOCHS = 4000, 3


def job_file(tmp_path, name, samples, backoff):
    body = {"apiVersion": "ddpjob.io/v1alpha1", "kind": "DDPJob", "metadata": {"name": name}, "spec": {
        "nodes": 3, "elastic": {"minNodes": 2, "maxNodes": 3}, "nprocPerNode": 1, "image": "local",
        "command": ["ddpjob-launch"],
        "args": ["ddpjob-train", "--data", "synthetic", "--synthetic-size", str(SIZE), "--epochs", str(EPOCHS),
                 "--batch-size", "16", "--eval-every", "0", "--log-every", "20", "--checkpoint-every-steps", "10",
                 "--sample-log", str(samples)],
        "checkpoint": {"claimName": "ckpt"},
        # At least 63 s of training (252 steps): the job outlasts its resizes on any machine.
        "env": [{"name": "DDPJOB_TEST_STEP_SECONDS", "value": "0.25"}],
        # Long enough for the survivors to re-form and train at 2 nodes before the node is back.
        "restartBackoffSeconds": backoff,
    }}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def node_processes(job_name: str, node_rank: int) -> list[int]:
    """Every process of one node of this run (its contract env names the job and the node)."""
    marks = (f"DDPJOB_NAME={job_name}".encode(), f"NODE_RANK={node_rank}".encode())
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    env = f.read().split(b"\0")
            except OSError:
                continue
            if all(m in env for m in marks):
                pids.append(int(entry))
    return pids


def launcher_pids(job_name: str, ranks) -> list[int]:
    """The `ddpjob-launch` process (the "container") of each of these nodes."""
    found = []
    for pid in sorted(pid for r in ranks for pid in node_processes(job_name, r)):
        try:
            if b"ddpjob-launch" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


def steps_logged(samples) -> int:
    return sum(1 for p in samples.glob("*.jsonl") for _ in p.open()) if samples.exists() else 0


def run_and_kill(tmp_path, node: int, backoff: int):
    """Run the job, SIGKILL every process of `node` in epoch 1; (output, sample log)."""
    name = f"el{uuid.uuid4().hex[:8]}"
    samples = tmp_path / "samples"
    log = (tmp_path / "run.log").open("w")
    run = subprocess.Popen([sys.executable, "-m", "ddpjob.cli", "run", str(job_file(tmp_path, name, samples, backoff))],
                           cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, text=True,
                           env={**os.environ, "PYTHONUNBUFFERED": "1"})  # the log is read while it runs
    try:
        deadline = time.monotonic() + 180
        while steps_logged(samples) < 3 * 40 and run.poll() is None:  # well into epoch 1 (84 steps)
            assert time.monotonic() < deadline, "the job did not start training within 180 s"
            time.sleep(0.5)
        others = [r for r in range(3) if r != node]
        survivors = [pid for r in others for pid in node_processes(name, r)]
        victims = node_processes(name, node)
        assert victims and survivors
        launchers = launcher_pids(name, others)
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        while "Resized: training at 3/3" not in (tmp_path / "run.log").read_text() and run.poll() is None:
            time.sleep(0.5)
        # The survivors' launchers (their "containers") ran on: their Pods were never restarted.
        later = launcher_pids(name, others)
        assert len(launchers) == 2 and later == launchers, (launchers, later)
        run.wait(timeout=400)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        log.close()
    out = (tmp_path / "run.log").read_text()
    assert run.returncode == 0, out[-5000:]
    status = yaml.safe_load(out.split("\n---\n")[-1])["status"]
    assert status["phase"] == "Succeeded" and status["restarts"] == 0 and status["resizes"] >= 2
    assert f"NodeLost: training at 2/3 nodes: lost {name}-{node}" in out and "Resized: training at 3/3 nodes" in out
    assert out.count("started 1 node(s)") == 1  # only the lost node was started again
    return out, samples


def test_a_lost_node_shrinks_the_job_which_grows_back_and_sees_every_sample_once(tmp_path):
    out, samples = run_and_kill(tmp_path, node=1, backoff=20)
    # Pod 0's record (what the operator and `ddpjob run` read) followed the job to its end,
    # whichever Pod the group's rank 0 was on.
    record = json.loads(next((tmp_path / ".ddpjob").glob("*/pods/*-0-a0/progress.json")).read_text())
    assert record["step"] == record["total_steps"] == EPOCHS * -(-SIZE // 48)
    worlds = sample_audit.worlds(str(samples))
    assert worlds[0] == 3 and 2 in worlds and worlds[-1] == 3, worlds
    assert sample_audit.lost_and_repeated(str(samples), SIZE, EPOCHS) == (0, 0)


def test_losing_node_zero_and_its_store_is_rejoined_not_a_gang_restart(tmp_path):
    out, samples = run_and_kill(tmp_path, node=0, backoff=5)
    assert "the rendezvous was lost (Pod 0 gone?): rejoining" in out
    assert sample_audit.lost_and_repeated(str(samples), SIZE, EPOCHS) == (0, 0)
