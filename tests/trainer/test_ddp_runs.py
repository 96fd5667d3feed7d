"""Real multi-process jobs through ddpjob-launch (gloo on CPU): learning, exact resume
after a kill and after SIGTERM, and a 2-node x 2-process job on one machine."""

import signal
import subprocess
import time

import pytest
import torch

from tests.support.deadlines import RUN
from tests.trainer.trainer_helpers import BIN, contract, events, final_weights, free_port, launch

pytestmark = pytest.mark.slow
# 3 epochs of 47 steps per rank: long enough to interrupt, short on 2 cores.
JOB = ["ddpjob-train", "--epochs", "3", "--synthetic-size", "3000", "--batch-size", "32", "--log-every", "5"]


def same_weights(a, b) -> bool:
    wa, wb = final_weights(a), final_weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    d = tmp_path_factory.mktemp("whole")
    r = launch(JOB, contract(nproc=2, DDPJOB_CHECKPOINT_DIR=d))
    assert r.returncode == 0, r.stderr[-3000:]
    return d, r


def test_two_processes_learn(uninterrupted):
    d, r = uninterrupted
    m = d / "metrics.jsonl"
    epochs = events(m, "epoch")
    # Rank 0 alone writes: one record per epoch, not one per rank.
    assert [e["epoch"] for e in epochs] == [1, 2, 3]
    assert events(m, "start")[0]["world_size"] == 2 and events(m, "start")[0]["backend"] == "gloo"
    assert epochs[-1]["loss"] < epochs[0]["loss"] and epochs[-1]["accuracy"] > epochs[0]["accuracy"]
    steps = events(m, "step")
    assert steps[-1]["loss"] < steps[0]["loss"] and steps[-1]["accuracy"] > steps[0]["accuracy"]
    assert events(m, "final")[0]["eval_accuracy"] > 0.8
    # Plain lines (not a tqdm bar) when stdout is not a terminal, from rank 0 only.
    assert r.stdout.count("epoch 3/3 done") == 1


def test_killed_after_epoch_resumes_at_next_epoch_with_same_weights(tmp_path, uninterrupted):
    first = launch(JOB, contract(nproc=2, DDPJOB_CHECKPOINT_DIR=tmp_path, DDPJOB_TEST_KILL_AFTER_EPOCH=1))
    assert first.returncode == 128 + signal.SIGKILL, first.stderr[-3000:]  # retryable, worker's own code
    second = launch(JOB, contract(nproc=2, DDPJOB_CHECKPOINT_DIR=tmp_path, DDPJOB_RESTART_COUNT=1))
    assert second.returncode == 0, second.stderr[-3000:]
    m = tmp_path / "metrics.jsonl"
    assert [(e["epoch"], e["restart"]) for e in events(m, "epoch")] == [(1, 0), (2, 1), (3, 1)]
    assert [(r["epoch"], r["next_epoch"], r["restart"]) for r in events(m, "resume")] == [(1, 2, 1)]
    assert same_weights(tmp_path, uninterrupted[0])


def sigterm_after_first_step(metrics, env, *extra):
    """Start the job, SIGTERM it once rank 0 has logged a step; (exit code, output)."""
    proc = subprocess.Popen(
        [str(BIN / "ddpjob-launch"), *JOB, *extra], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    deadline = time.monotonic() + RUN
    while not (metrics.exists() and events(metrics, "step")):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()[0][-3000:]
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=RUN)[0]
    return proc.returncode, out


def test_sigterm_saves_exits_143_and_resumes_exactly(tmp_path, uninterrupted):
    m = tmp_path / "metrics.jsonl"
    code, out = sigterm_after_first_step(m, contract(nproc=2, DDPJOB_CHECKPOINT_DIR=tmp_path))
    assert code == 143, out[-3000:]
    assert "stop requested (signal 15): saving a checkpoint" in out and "without a checkpoint" not in out
    stopped = events(m, "preempted")
    assert len(stopped) == 1 and stopped[0]["exit_code"] == 143
    again = launch(JOB, contract(nproc=2, DDPJOB_CHECKPOINT_DIR=tmp_path, DDPJOB_RESTART_COUNT=1))
    assert again.returncode == 0, again.stderr[-3000:]
    resume = events(m, "resume")[0]
    assert (resume["step"], resume["batch"]) == (stopped[0]["step"], stopped[0]["batch"])
    assert [e["epoch"] for e in events(m, "epoch")] == [1, 2, 3]  # nothing lost, nothing twice
    assert same_weights(tmp_path, uninterrupted[0])


def test_sigterm_without_a_checkpoint_dir_says_so_once_and_never_saving(tmp_path):
    m = tmp_path / "metrics.jsonl"
    code, out = sigterm_after_first_step(m, contract(nproc=1), "--metrics-file", str(m))
    assert code == 143, out[-3000:]
    assert "stop requested (signal 15): stopping without a checkpoint" in out, out[-3000:]
    assert "saving" not in out and out.count("without a checkpoint") == 1


def test_launcher_runs_two_nodes_of_two_processes(tmp_path):
    port = free_port()  # both "nodes" must agree on it, as the contract's MASTER_PORT
    job = [
        "ddpjob-train",
        "--epochs",
        "2",
        "--synthetic-size",
        "1024",
        "--batch-size",
        "32",
        "--metrics-file",
        str(tmp_path / "m.jsonl"),
    ]
    nodes = [
        subprocess.Popen(
            [str(BIN / "ddpjob-launch"), *job],
            env=contract(nnodes=2, node_rank=i, nproc=2, port=port),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in (0, 1)
    ]
    outs = [p.communicate(timeout=180)[0] for p in nodes]
    assert [p.returncode for p in nodes] == [0, 0], outs[0][-2000:] + outs[1][-2000:]
    start = events(tmp_path / "m.jsonl", "start")
    assert len(start) == 1 and start[0]["world_size"] == 4
    assert [e["epoch"] for e in events(tmp_path / "m.jsonl", "epoch")] == [1, 2]
