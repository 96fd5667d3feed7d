"""`ddpjob run` runs an elastic job as the operator does, with the same plan: one node's
processes killed mid-epoch, the others keep training at the smaller size (no gang
restart), the lost node comes back after the restart backoff and the group grows back;
the job succeeds with every sample trained on exactly once per epoch. ddpjob-train on gloo
resizes in place: the survivors' worker processes (not only their launchers) are the same
before and after both resizes, and the newcomer takes the state from a live peer. Node 0
is lost the same way: no store of the group lives only there."""

import json
import os
import signal
import time
import uuid

import pytest
import yaml

from ddpjob_devcluster.scenarios import node_processes as procs, sample_audit
from tests.support.deadlines import CLUSTER_TEST, RUN

pytestmark = [pytest.mark.slow, pytest.mark.timeout(CLUSTER_TEST)]

SIZE, EPOCHS = 4000, 3


def job_file(tmp_path, name, samples, backoff):
    body = {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {"name": name},
        "spec": {
            "nodes": 3,
            "elastic": {"minNodes": 2, "maxNodes": 3},
            "nprocPerNode": 1,
            "image": "local",
            "command": ["ddpjob-launch"],
            "args": [
                "ddpjob-train",
                "--data",
                "synthetic",
                "--synthetic-size",
                str(SIZE),
                "--epochs",
                str(EPOCHS),
                "--batch-size",
                "16",
                "--eval-every",
                "0",
                "--log-every",
                "20",
                "--checkpoint-every-steps",
                "10",
                "--sample-log",
                str(samples),
            ],
            "checkpoint": {"claimName": "ckpt"},
            # At least 63 s of training (252 steps) until the node is back in the group: the
            # job outlasts its resizes on any machine; the steps left run at full speed.
            "env": [
                {"name": "DDPJOB_TEST_STEP_SECONDS", "value": "0.25"},
                {"name": "DDPJOB_TEST_STEP_SECONDS_UNTIL", "value": str(release_file(tmp_path))},
            ],
            # Long enough for the survivors to re-form and train at 2 nodes before the node is back.
            "restartBackoffSeconds": backoff,
        },
    }
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def release_file(tmp_path):
    return tmp_path / "release"


def steps_logged(samples) -> int:
    return sum(1 for p in samples.glob("*.jsonl") for _ in p.open()) if samples.exists() else 0


def run_and_kill(tmp_path, node: int, backoff: int):
    """Run the job, SIGKILL every process of `node` in epoch 1; (output, sample log)."""
    name = f"el{uuid.uuid4().hex[:8]}"
    samples = tmp_path / "samples"
    with procs.started(tmp_path, job_file(tmp_path, name, samples, backoff), tmp_path / "run.log") as run:
        deadline = time.monotonic() + 300
        # Well into epoch 1 (84 steps), at its full size: on a busy machine an elastic job may
        # start at its minimum and grow once the last node is up.
        while not (steps_logged(samples) >= 3 * 40 and sample_audit.worlds(str(samples))[-1:] == [3]):
            assert run.poll() is None, (tmp_path / "run.log").read_text()[-5000:]
            assert time.monotonic() < deadline, "the job did not train at 3 nodes within 300 s"
            time.sleep(0.5)
        others = [r for r in range(3) if r != node]
        survivors = [pid for r in others for pid in procs.of_node(name, r)]
        victims = procs.of_node(name, node)
        assert victims and survivors
        launchers, workers = procs.launchers(name, others), procs.workers(name, others)
        assert len(workers) == 2, workers
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 300
        # Back in the group by the trainers' own record (a group of 3 after one of 2), not by the
        # operator's Resized Event alone: that one follows the Pods, and a Pod runs a while before
        # its trainer joins (on a busy machine the job could end first, its steps released).
        while not (
            sample_audit.worlds(str(samples))[-2:] == [2, 3]
            and "Resized: training at 3/3" in (tmp_path / "run.log").read_text()
        ):
            assert run.poll() is None, (tmp_path / "run.log").read_text()[-5000:]
            assert time.monotonic() < deadline, "the lost node was not back in the group within 300 s"
            time.sleep(0.5)
        # The survivors' launchers (their "containers") ran on: their Pods were never restarted.
        later = procs.launchers(name, others)
        assert len(launchers) == 2 and later == launchers, (launchers, later)
        # Nor were their workers: the group re-formed in the same processes, twice.
        assert procs.workers(name, others) == workers, (workers, procs.workers(name, others))
        release_file(tmp_path).touch()  # both resizes seen: the rest of the job is only its end
        run.wait(timeout=RUN)
    out = (tmp_path / "run.log").read_text()
    assert run.returncode == 0, out[-5000:]
    status = yaml.safe_load(out.split("\n---\n")[-1])["status"]
    assert status["phase"] == "Succeeded" and status["restarts"] == 0 and status["resizes"] >= 2
    assert f"NodeLost: training at 2/3 nodes: lost {name}-{node}" in out and "Resized: training at 3/3 nodes" in out
    assert out.count("started 1 node(s)") == 1  # only the lost node was started again
    # Each survivor's worker re-formed its group twice (shrunk, grown back) in the same process.
    assert out.count("ddpjob-train: resized group") >= 2 * 2, out[-5000:]
    return out, samples


def test_a_lost_node_shrinks_the_job_which_grows_back_and_sees_every_sample_once(tmp_path):
    _out, samples = run_and_kill(tmp_path, node=1, backoff=20)
    # Pod 0's record (what the operator and `ddpjob run` read) followed the job to its end,
    # whichever Pod the group's rank 0 was on.
    record = json.loads(next((tmp_path / ".ddpjob").glob("*/pods/*-0-a0/progress.json")).read_text())
    assert record["step"] == record["total_steps"] == EPOCHS * -(-SIZE // 48)
    worlds = sample_audit.worlds(str(samples))
    # At 3 when the node was lost, trained on at 2, grown back to 3 (a slow start may add
    # groups before the first 3).
    full = worlds.index(3)
    assert 2 in worlds[full:] and worlds[-1] == 3, worlds
    assert sample_audit.lost_and_repeated(str(samples), SIZE, EPOCHS) == (0, 0)


def test_losing_node_zero_and_its_store_is_rejoined_not_a_gang_restart(tmp_path):
    out, samples = run_and_kill(tmp_path, node=0, backoff=5)
    assert "the rendezvous was lost" not in out  # no launcher had to rejoin anything
    assert sample_audit.lost_and_repeated(str(samples), SIZE, EPOCHS) == (0, 0)
