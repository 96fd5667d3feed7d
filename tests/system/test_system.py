"""The whole system, no docker: a DDPJob applied to a real kube-apiserver (the test
worker's control plane) is reconciled by the real operator process, installed from the
chart and acting with its RBAC, whose Pods the process kubelet runs as real
`ddpjob-launch` -> torchrun -> `ddpjob-train` processes (gloo, CPU). Training really
happens; the assertions read the job's status, the Pods, the events and the trainer's
JSON-lines metrics.

Training is kept tiny: the example trains 3 epochs of 4096 samples; the fault tests
train 8192 samples per epoch (about a second on 2 cores) so that a fault lands
mid-training, and use restartBackoffSeconds: 0.
"""

from __future__ import annotations

import copy
import pathlib
import signal
from typing import Any

import pytest

from ddpjob_devcluster.clusters.client import load_example, read_metrics, wait_until
from ddpjob_devcluster.clusters.real import RealCluster
from tests.support.deadlines import CLUSTER_TEST, PHASE, REACTION, RUN

pytestmark = [pytest.mark.slow, pytest.mark.timeout(CLUSTER_TEST)]

EXAMPLE = "mnist-cpu"
SAMPLES = 8192  # per epoch in the fault tests: 32 steps of 4 x 64
STEPS_PER_EPOCH = SAMPLES // (4 * 64)


def fault_job(name: str, *, epochs: int = 3, checkpoint: bool = True, **spec: Any) -> dict[str, Any]:
    """The example, renamed, with a checkpoint volume, ~1 s epochs and no restart backoff."""
    body = copy.deepcopy(load_example())
    body["metadata"]["name"] = name
    body["spec"].update(
        restartBackoffSeconds=0,
        args=[
            "ddpjob-train",
            "--model",
            "mlp",
            "--data",
            "synthetic",
            "--epochs",
            str(epochs),
            "--batch-size",
            "64",
            "--synthetic-size",
            str(SAMPLES),
        ],
    )
    if checkpoint:
        body["spec"]["checkpoint"] = {"claimName": f"{name}-checkpoints"}
    body["spec"].update(spec)
    return body


def epoch_done(metrics: pathlib.Path, epoch: int) -> bool:
    return any(r.get("event") == "epoch" and r.get("epoch") == epoch for r in read_metrics(metrics))


def wait_epoch(cluster: RealCluster, name: str, metrics: pathlib.Path, epoch: int = 1) -> None:
    def check() -> bool:
        if cluster.status(name).get("phase") in ("Succeeded", "Failed"):
            from ddpjob_devcluster.clusters.operator_runner import Abort

            raise Abort(f"{name} finished before epoch {epoch}: {cluster.status(name)}")
        return epoch_done(metrics, epoch)

    wait_until(check, RUN, f"{name}: epoch {epoch} was not completed", lambda: f"status {cluster.status(name)}")


def assert_resumed_without_gaps(metrics: pathlib.Path, epochs: int) -> None:
    """Every epoch trained exactly once across the two attempts, the second attempt
    resumed from the first one's checkpoint, and the step count adds up."""
    records = read_metrics(metrics)
    trained = [(r["restart"], r["epoch"]) for r in records if r["event"] == "epoch"]
    assert sorted(e for _, e in trained) == list(range(1, epochs + 1)), f"epochs trained: {trained}"
    before = [e for r, e in trained if r == 0]
    after = [e for r, e in trained if r == 1]
    assert before and before == list(range(1, len(before) + 1)), trained
    assert after == list(range(len(before) + 1, epochs + 1)), trained
    resumes = [r for r in records if r["event"] == "resume"]
    assert len(resumes) == 1 and resumes[0]["restart"] == 1, resumes
    assert resumes[0]["next_epoch"] == len(before) + 1, (resumes, trained)
    final = [r for r in records if r["event"] == "final"]
    assert len(final) == 1 and final[0]["restart"] == 1 and final[0]["epoch"] == epochs, final
    assert final[0]["step"] == epochs * STEPS_PER_EPOCH, final  # no step lost or repeated


def terminated(pod: dict[str, Any]) -> dict[str, Any]:
    return pod["status"]["containerStatuses"][0]["state"].get("terminated") or {}


def test_the_example_job_trains_to_succeeded(cluster: RealCluster, tmp_path: pathlib.Path) -> None:
    body = load_example()  # the example's own spec; only the metrics file is added
    metrics = tmp_path / "metrics.jsonl"
    body["spec"]["args"] = [*body["spec"]["args"], "--metrics-file", str(metrics)]
    cluster.create_job(body)

    status = cluster.wait_phase(EXAMPLE, "Succeeded", timeout=RUN)

    assert status["readyNodes"] == 2 and status["restarts"] == 0
    assert status["startTime"] <= status["completionTime"]
    assert {c["type"]: c["status"] for c in status["conditions"]} == {"Running": "False", "Succeeded": "True"}
    pods = cluster.pods(EXAMPLE)
    assert [p["metadata"]["name"] for p in pods] == ["mnist-cpu-0", "mnist-cpu-1"]
    for pod in pods:  # the Pod keeps the cluster contract; only the kubelet resolved it
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        assert env["MASTER_ADDR"] == f"mnist-cpu-0.mnist-cpu.{cluster.namespace}.svc" and env["WORLD_SIZE"] == "4"
        assert pod["status"]["phase"] == "Succeeded"
        assert terminated(pod)["exitCode"] == 0 and terminated(pod)["reason"] == "Completed"
    service = cluster.core.read_namespaced_service(EXAMPLE, cluster.namespace)
    assert service.spec is not None and service.spec.cluster_ip == "None"
    # kopf posts events in the background: the status may be written first.
    wait_until(
        lambda: {"Running", "Succeeded"} <= {e["reason"] for e in cluster.events(EXAMPLE) if e["type"] == "Normal"},
        15,
        "no Normal events Running and Succeeded",
        lambda: cluster.events(EXAMPLE),
    )

    records = read_metrics(metrics)
    start = next(r for r in records if r["event"] == "start")
    assert start["world_size"] == 4 and start["backend"] == "gloo" and start["epochs"] == 3
    assert [r["epoch"] for r in records if r["event"] == "epoch"] == [1, 2, 3]
    final = next(r for r in records if r["event"] == "final")
    assert final["epoch"] == 3 and final["step"] == 3 * 4096 // (4 * 64) and final["restart"] == 0
    assert final["accuracy"] > 0.9 and final["eval_accuracy"] > 0.9  # it learned something
    kubelet = cluster.kubelet
    assert kubelet is not None  # started
    assert len(kubelet.containers) == 2


def test_a_killed_process_restarts_the_gang_from_the_checkpoint(cluster: RealCluster) -> None:
    name = "killed"
    cluster.create_job(fault_job(name))
    kubelet = cluster.kubelet
    assert kubelet is not None  # started
    metrics = kubelet.checkpoint_dir(name) / "metrics.jsonl"
    wait_epoch(cluster, name, metrics, 1)

    kubelet.kill(f"{name}-1", sig=signal.SIGKILL)  # node 1's container dies: exit 137

    status = cluster.wait_phase(name, "Succeeded", timeout=RUN)
    assert status["restarts"] == 1
    assert status["lastFailure"]["pod"] == f"{name}-1" and status["lastFailure"]["exitCode"] == 137
    assert {p["metadata"]["labels"]["ddpjob.io/restart-count"] for p in cluster.pods(name)} == {"1"}
    wait_until(
        lambda: any(e["reason"] == "Restarting" and e["type"] == "Warning" for e in cluster.events(name)),
        15,
        "no Warning event Restarting",
    )
    assert_resumed_without_gaps(metrics, epochs=3)


def test_a_pod_deleted_by_hand_restarts_the_gang(cluster: RealCluster) -> None:
    name = "deleted"
    cluster.create_job(fault_job(name))
    kubelet = cluster.kubelet
    assert kubelet is not None  # started
    metrics = kubelet.checkpoint_dir(name) / "metrics.jsonl"
    wait_epoch(cluster, name, metrics, 1)
    doomed = kubelet.container(f"{name}-0")

    cluster.core.delete_namespaced_pod(f"{name}-0", cluster.namespace)  # as `kubectl delete pod` does

    status = cluster.wait_phase(name, "Succeeded", timeout=RUN)
    assert status["restarts"] == 1
    assert status["lastFailure"]["pod"] == f"{name}-0" and status["lastFailure"]["reason"] == "PodDeleted"
    # The kubelet stopped the deleted Pod's processes (SIGTERM: the trainer saves and exits).
    assert doomed is not None and doomed.deleted and doomed.exit_code is not None
    assert_resumed_without_gaps(metrics, epochs=3)


def test_the_operator_restarted_mid_training_finishes_the_job_without_duplicates(cluster: RealCluster) -> None:
    name = "survivor"
    cluster.create_job(fault_job(name, epochs=4))
    kubelet = cluster.kubelet
    assert kubelet is not None  # started
    metrics = kubelet.checkpoint_dir(name) / "metrics.jsonl"
    cluster.wait_phase(name, "Running", readyNodes=2)

    op = cluster.operator
    assert op is not None  # started
    op.stop(signal.SIGKILL)  # a crash: no graceful shutdown at all
    wait_epoch(cluster, name, metrics, 1)  # training goes on without the operator
    assert cluster.status(name)["phase"] == "Running"
    op.start()

    status = cluster.wait_phase(name, "Succeeded", timeout=RUN)
    assert status["restarts"] == 0
    pods = cluster.pods(name)
    assert [p["metadata"]["name"] for p in pods] == [f"{name}-0", f"{name}-1"]
    assert len(kubelet.containers) == 2  # no Pod was ever created twice
    assert {p["metadata"]["uid"] for p in pods} == set(kubelet.containers)
    final = [r for r in read_metrics(metrics) if r["event"] == "final"]
    assert len(final) == 1 and final[0]["epoch"] == 4 and final[0]["restart"] == 0


def test_exhausting_max_restarts_fails_the_job_with_the_last_failure(cluster: RealCluster) -> None:
    name = "doomed"
    cluster.create_job(fault_job(name, checkpoint=False, maxRestarts=1))
    kubelet = cluster.kubelet
    assert kubelet is not None  # started
    for attempt in (0, 1):  # node 1 crashes as soon as it starts, every attempt
        container = wait_until(
            lambda: (
                (c := kubelet.container(f"{name}-1")) is not None and c.attempt == attempt and c  # noqa: B023 - the wait calls it before the loop moves on
            ),
            60,
            f"no running container of attempt {attempt}",
            lambda: cluster.diagnostics(),
        )
        kubelet.kill(f"{name}-1", sig=signal.SIGKILL)

    status = cluster.wait_phase(name, "Failed", timeout=PHASE)
    assert status["restarts"] == 1
    failure = status["lastFailure"]
    assert failure["pod"] == f"{name}-1" and failure["exitCode"] == 137 and failure["reason"] == "Error"
    assert "maxRestarts=1" in status["message"]
    # kopf posts events in the background: the status may be written first.
    warning = wait_until(
        lambda: [e for e in cluster.events(name) if e["type"] == "Warning" and e["reason"] == "Failed"],
        REACTION,
        "no Warning event Failed",
    )
    assert len(warning) == 1 and f"{name}-1" in warning[0]["message"]
    # The failed gang is stopped: the surviving node's Pod is deleted and its processes end.
    wait_until(lambda: not any(c.running for c in kubelet.snapshot()), PHASE, "processes of the failed job still run")
    assert container.exit_code == 137


def test_a_command_that_cannot_start_fails_at_once_with_the_runtimes_reason(cluster: RealCluster) -> None:
    """A typo in the command (issue 41, item 1): exit 128 StartError is permanent whatever the
    restartPolicy (the example's is OnFailure), said with the runtime's words, and warned
    about as the typo it is, not as a world the command cannot fill."""
    name = "badcmd"
    cluster.create_job(fault_job(name, checkpoint=False, command=["ddpjob-lanch"], maxRestarts=3))
    status = cluster.wait_phase(name, "Failed", timeout=PHASE)
    failure = status["lastFailure"]
    assert status.get("restarts", 0) == 0 and failure["exitCode"] == 128 and failure["reason"] == "StartError"
    assert "'ddpjob-lanch' is not installed" in failure["errorLine"] and failure["retryable"] is False
    assert "'ddpjob-lanch' is not installed" in status["message"]
    assert status["message"].endswith("the container could not start: not retried under any restartPolicy")

    # Events are posted apart from the status: wait for both Warnings, in whatever order they land.
    def warned() -> list[str] | None:
        reasons = [e["reason"] for e in cluster.events(name) if e["type"] == "Warning"]
        return reasons if {"Failed", "MisspeltCommand"} <= set(reasons) else None

    warnings = wait_until(
        warned,
        REACTION,
        "no Warning events Failed and MisspeltCommand",
        lambda: [e["reason"] for e in cluster.events(name)],
    )
    assert "NotALauncher" not in warnings and warnings.count("MisspeltCommand") == 1, warnings
