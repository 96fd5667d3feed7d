"""The whole trainer on the DataLoader path (`--data imagefolder`): a 2-node group stopped
mid-epoch (checkpoint), resumed by 1 node, every training sample seen exactly once per
epoch by the sample log's audit. The same stop and resume of a rigid job (DistributedSampler
shards, an epoch redone at another size) shows that the audit catches the repeats."""

import signal
import subprocess
import time

import pytest

from ddpjob_devcluster.scenarios import sample_audit
from tests.trainer.trainer_helpers import BIN, contract, events, free_port, write_imagefolder

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

PER_CLASS, EPOCHS, STOP_AT = 20, 2, 3  # 60 images; micro-batches of 8 (4 x 1 x 2 nodes): 8 per epoch


def start_group(tmp_path, nodes, elastic, tag, **extra):
    """`nodes` launchers on this machine, one process each; (processes, log paths)."""
    port = free_port()
    data, ckpt, samples = tmp_path / "img", tmp_path / "ckpt", tmp_path / "samples"
    cmd = [
        str(BIN / "ddpjob-launch"),
        "ddpjob-train",
        "--data",
        f"imagefolder:{data}",
        "--model",
        "cnn",
        "--image-size",
        "8",
        "--workers",
        "1",
        "--batch-size",
        "4",
        "--epochs",
        str(EPOCHS),
        "--eval-every",
        "0",
        "--log-every",
        "1",
        "--checkpoint-dir",
        str(ckpt),
        "--sample-log",
        str(samples),
    ]
    procs, logs = [], []
    for node in range(nodes):
        env = contract(nnodes=nodes, node_rank=node, nproc=1, port=port, **extra)
        if elastic:  # 1 to 2 nodes; torchrun's c10d rendezvous sets the ranks
            env.update(NNODES="1:2", PET_NNODES="1:2")
            env.pop("WORLD_SIZE"), env.pop("RANK"), env.pop("LOCAL_RANK"), env.pop("LOCAL_WORLD_SIZE")
        logs.append(tmp_path / f"{tag}-node{node}.log")
        procs.append(subprocess.Popen(cmd, env=env, stdout=logs[-1].open("w"), stderr=subprocess.STDOUT))
    return procs, logs


def wait_all(procs, logs, timeout=240) -> list[int]:
    try:
        return [p.wait(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def stop_and_resume(tmp_path, elastic):
    """2 nodes until step STOP_AT of epoch 1, then SIGTERM (a checkpoint there); 1 node to the end."""
    write_imagefolder(tmp_path / "img", per_class=PER_CLASS)
    procs, logs = start_group(tmp_path, 2, elastic, "first", DDPJOB_TEST_HANG_AT_STEP=STOP_AT)
    deadline = time.monotonic() + 180
    while not any("hangs before step" in log.read_text() for log in logs):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            wait_all(procs, logs, timeout=1)
            tails = "\n".join(log.read_text()[-2000:] for log in logs)
            raise AssertionError(f"no rank reached the hang at step {STOP_AT:d} within 180 s:\n{tails}")
        time.sleep(0.2)
    for p in procs:  # a preemption: the group finishes the step, saves and exits
        p.send_signal(signal.SIGTERM)
    assert wait_all(procs, logs) == [143, 143], "\n".join(log.read_text()[-3000:] for log in logs)
    procs, logs = start_group(tmp_path, 1, elastic, "second", DDPJOB_RESTART_COUNT=1)
    assert wait_all(procs, logs) == [0], logs[0].read_text()[-3000:]
    samples = str(tmp_path / "samples")
    assert sample_audit.worlds(samples) == [2, 1]
    return events(tmp_path / "ckpt" / "metrics.jsonl", "resume"), sample_audit.lost_and_repeated(
        samples, 3 * PER_CLASS, EPOCHS
    )


def test_an_elastic_imagefolder_job_resumed_at_another_size_sees_every_sample_once(tmp_path):
    resumes, (lost, repeated) = stop_and_resume(tmp_path, elastic=True)
    # It went on mid-epoch (the position is a sample offset at any size), not from the start.
    assert [(r["epoch"], r["batch"], r["step"]) for r in resumes] == [(0, STOP_AT, STOP_AT)]
    assert (lost, repeated) == (0, 0)


def test_the_audit_catches_the_repeats_of_a_rigid_job_resumed_at_another_size(tmp_path):
    resumes, (lost, repeated) = stop_and_resume(tmp_path, elastic=False)
    # DistributedSampler's shards change with the world size: the epoch is redone from its start.
    assert [(r["epoch"], r["batch"]) for r in resumes] == [(0, 0)]
    assert lost == 0 and repeated == STOP_AT * 8  # the samples of the steps before the stop
