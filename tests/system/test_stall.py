"""Progress and stall detection with the real operator: it reads Pod 0's /progress (at the
Pod's own IP, as in a cluster), writes status.progress, and restarts a gang whose rank 1
stops making progress without exiting; the job resumes from its checkpoint and succeeds."""

from __future__ import annotations

import copy
import pathlib
from collections.abc import Iterator

import pytest

from ddpjob_devcluster.clusters.client import load_example, read_metrics, wait_until
from ddpjob_devcluster.clusters.real import RealCluster
from tests.support.deadlines import CLUSTER_TEST, PHASE, REACTION, RUN
from tests.system.conftest import running_cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(CLUSTER_TEST)]

# Long enough that a healthy rank never looks stalled on a busy machine (the time since
# its launcher started counts: torch imported, the checkpoint loaded, a rendezvous made),
# however long the hung one then waits to be seen.
STALL_TIMEOUT = 60


def polling_every(
    interval: str, request: pytest.FixtureRequest, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[RealCluster]:
    # The operator process inherits this: how often it reads /progress (0: never).
    monkeypatch.setenv("DDPJOB_PROGRESS_INTERVAL_SECONDS", interval)
    with running_cluster(request, tmp_path / "cluster") as local:
        yield local


@pytest.fixture
def fast_progress_cluster(
    request: pytest.FixtureRequest, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[RealCluster]:
    yield from polling_every("2", request, tmp_path, monkeypatch)  # every 2 s instead of 30 s


def test_a_hung_rank_is_restarted_as_stalled_and_the_job_resumes(fast_progress_cluster: RealCluster) -> None:
    cluster, name = fast_progress_cluster, "hang"
    body = copy.deepcopy(load_example())  # 2 nodes x 2 processes
    body["metadata"]["name"] = name
    body["spec"].update(
        restartBackoffSeconds=0,
        maxRestarts=1,
        stallTimeoutSeconds=STALL_TIMEOUT,
        checkpoint={"claimName": "ckpt"},
        # 1024 samples / (16 x 4 ranks) = 16 steps an epoch; rank 1 hangs before step 20.
        args=[
            "ddpjob-train",
            "--epochs",
            "2",
            "--synthetic-size",
            "1024",
            "--batch-size",
            "16",
            "--log-every",
            "2",
            "--eval-every",
            "0",
        ],
        env=[{"name": "DDPJOB_TEST_HANG_AT_STEP", "value": "20"}],
    )
    cluster.create_job(body)

    # While it runs, the operator publishes the progress record it read from Pod 0.
    progress = wait_until(
        lambda: (cluster.status(name).get("progress") or {}).get("step"),
        PHASE,
        "no status.progress",
        lambda: cluster.status(name),
    )
    assert progress > 0
    shown = cluster.status(name)["progress"]
    assert shown["totalSteps"] == 32 and shown["totalEpochs"] == 2 and shown["summary"].startswith("epoch ")

    status = cluster.wait_phase(name, "Succeeded", timeout=RUN)
    assert status["restarts"] == 1
    failure = status["lastFailure"]
    assert failure["reason"] == "Stalled" and f"stallTimeoutSeconds={STALL_TIMEOUT}" in failure["message"]
    # Rank 1 (Pod 0's second process) stopped; ranks 0, 2 and 3 wait for it in step 20.
    assert "rank(s) 1 stopped at step 19 while the others reached step 20" in failure["message"]
    assert {c["type"]: c["status"] for c in status["conditions"]}["Stalled"] == "False"  # advancing again
    wait_until(
        lambda: any(
            e["reason"] == "Stalled" and e["type"] == "Warning" and "rank(s) 1" in e["message"]
            for e in cluster.events(name)
        ),
        REACTION,
        "no Warning event Stalled naming rank 1",
        lambda: cluster.events(name),
    )

    kubelet = cluster.kubelet
    assert kubelet is not None  # started
    records = read_metrics(kubelet.checkpoint_dir(name) / "metrics.jsonl")
    resumes = [r for r in records if r["event"] == "resume"]
    assert len(resumes) == 1 and resumes[0]["restart"] == 1 and resumes[0]["step"] >= 16, resumes
    final = [r for r in records if r["event"] == "final"]
    assert len(final) == 1 and final[0]["restart"] == 1 and final[0]["step"] == 32, final


@pytest.fixture
def unpolled_cluster(
    request: pytest.FixtureRequest, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[RealCluster]:
    # The operator never reads /progress: what the status says at the end came another way.
    yield from polling_every("0", request, tmp_path, monkeypatch)


def test_a_short_job_ends_with_its_final_progress(unpolled_cluster: RealCluster) -> None:
    """A job may end between two reads of its progress (every 30 s), or before the first:
    Pod 0's launcher leaves the last record as its termination message, which the kubelet
    reports and the operator puts in the finished job's status."""
    cluster, name = unpolled_cluster, "short"
    script = pathlib.Path(__file__).resolve().parents[1] / "local" / "scripts" / "progress_by_hand.py"
    body = copy.deepcopy(load_example())
    body["metadata"]["name"] = name
    body["spec"].update(
        nodes=1,
        nprocPerNode=1,
        command=["ddpjob-launch"],
        args=[str(script)],
        env=[
            {"name": "DDPJOB_TEST_PROGRESS_STEPS", "value": "6"},
            {"name": "DDPJOB_TEST_PROGRESS_LINGER", "value": "0"},
        ],
    )
    cluster.create_job(body)
    status = cluster.wait_phase(name, "Succeeded", timeout=RUN)
    progress = status.get("progress") or {}
    assert (progress.get("step"), progress.get("totalSteps"), progress.get("final")) == (6, 6, True), status
    assert progress["summary"] == "epoch 3/3 step 6/6 (100%)"
