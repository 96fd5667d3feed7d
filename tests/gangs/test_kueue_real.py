"""`gang: kueue` on the real Kueue (v0.17.0, its manager built from its module and run
beside the real control plane: `controlplane/kueue.py`, fixture `kueue_controller`).

Six 1-GPU process-kubelet Nodes; per test a ResourceFlavor, a ClusterQueue with a
6-GPU quota (preemption within it: LowerPriority) and a LocalQueue in the test's
namespace, which the jobs' `spec.scheduling.queue` names. The chart is installed with
`gang.kueue.enabled`, so its RBAC (Pods, and `get` on Kueue's Workloads) is the one tested.
Kueue's webhook gates the Pods (`kueue.x-k8s.io/admission`); its scheduler admits the
Pod group (one per gang attempt) against the quota, ungates it, and preempts it.
"""

from __future__ import annotations

import contextlib
import pathlib
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from ddpjob_devcluster.clusters.client import ddpjob_command, json_object, wait_until
from ddpjob_devcluster.clusters.real import RealCluster
from ddpjob_devcluster.controlplane import kueue
from tests.gangs.test_gang_real import GPU_NODES, Hold, bound, gang_job, running
from tests.support.control_plane import real_cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

KUEUE = ("kueue.x-k8s.io", "v1beta2")
QUOTA = {"cpu": "48", "memory": "192Gi", "nvidia.com/gpu": "6"}
NO_QUOTA = "insufficient unused quota for nvidia.com/gpu"


@pytest.fixture
def queued(request: pytest.FixtureRequest, tmp_path: pathlib.Path, kueue_controller: Any) -> Iterator[RealCluster]:
    """The cluster, its queue objects (the LocalQueue is named after the namespace), and
    two PriorityClasses (`<ns>-low`, `<ns>-high`); all removed afterwards."""
    with real_cluster(
        request, tmp_path / "cluster", nodes=GPU_NODES, values={"gang": {"kueue": {"enabled": True}}}
    ) as cluster:
        name = cluster.namespace
        custom = kubernetes.client.CustomObjectsApi(cluster.api)
        scheduling = kubernetes.client.SchedulingV1Api(cluster.api)
        made: list[tuple[str, str]] = []
        try:
            for obj in kueue.queue_objects(name, name, QUOTA):
                if obj["kind"] == "LocalQueue":
                    custom.create_namespaced_custom_object(*KUEUE, name, "localqueues", obj)
                else:
                    plural = obj["kind"].lower() + "s"
                    custom.create_cluster_custom_object(*KUEUE, plural, obj)
                    made.append((plural, name))
            for suffix, value in (("low", 100), ("high", 1000)):
                scheduling.create_priority_class({"metadata": {"name": f"{name}-{suffix}"}, "value": value})  # type: ignore[arg-type]  # a dict body: the client sends it as it is
            yield cluster
        finally:
            with contextlib.suppress(kubernetes.client.ApiException):
                for suffix in ("low", "high"):
                    scheduling.delete_priority_class(f"{name}-{suffix}")
            jobs = json_object(cluster.custom.list_namespaced_custom_object("ddpjob.io", "v1alpha1", name, "ddpjobs"))
            for job in jobs["items"]:
                cluster.custom.delete_namespaced_custom_object(
                    "ddpjob.io", "v1alpha1", name, "ddpjobs", job["metadata"]["name"]
                )
            for plural, made_name in reversed(made):  # the ClusterQueue waits for its Workloads to go
                with contextlib.suppress(kubernetes.client.ApiException):
                    custom.delete_cluster_custom_object(*KUEUE, plural, made_name)


def kueue_job(
    cluster: RealCluster, name: str, nodes: int = 4, sleep: float = 4, hold: Hold | None = None, **extra: Any
) -> dict[str, Any]:
    scheduling = {"queue": cluster.namespace, **extra.pop("scheduling", {})}
    body = gang_job(name, "kueue", nodes=nodes, sleep=sleep, hold=hold, **scheduling)
    body["spec"].update(extra)
    return body


def workloads(cluster: RealCluster) -> list[dict[str, Any]]:
    custom = kubernetes.client.CustomObjectsApi(cluster.api)
    return json_object(custom.list_namespaced_custom_object(*KUEUE, cluster.namespace, "workloads"))["items"]


def workload(cluster: RealCluster, name: str) -> dict[str, Any] | None:
    return next((w for w in workloads(cluster) if w["metadata"]["name"] == name), None)


def gated(cluster: RealCluster, job: str) -> int:
    return sum(
        1
        for p in cluster.pods(job)
        if any(g.get("name") == "kueue.x-k8s.io/admission" for g in p["spec"].get("schedulingGates") or [])
    )


def state(cluster: RealCluster, job: str) -> list[Any]:
    """What a failed wait prints: the job's Pods (phase, node, gates, finalizers, group) and
    the namespace's Workloads with their conditions."""
    pods = [
        (
            p["metadata"]["name"],
            p["metadata"]["labels"].get("kueue.x-k8s.io/pod-group-name"),
            p["status"].get("phase"),
            p["spec"].get("nodeName"),
            bool(p["metadata"].get("deletionTimestamp")),
            p["metadata"].get("finalizers"),
            [g["name"] for g in p["spec"].get("schedulingGates") or []],
        )
        for p in cluster.pods(job)
    ]
    loads = [
        (
            w["metadata"]["name"],
            [(c["type"], c["status"], c.get("reason")) for c in (w.get("status") or {}).get("conditions") or []],
        )
        for w in workloads(cluster)
    ]
    return [cluster.status(job), pods, loads]


def quota_message(cluster: RealCluster, name: str) -> str:
    conds = {c["type"]: c for c in ((workload(cluster, name) or {}).get("status") or {}).get("conditions") or []}
    cond = conds.get("QuotaReserved") or {}
    return cond.get("message", "") if cond.get("status") == "False" else ""


def test_two_gangs_on_a_six_gpu_quota_the_second_waits_whole_with_the_queues_reason(
    queued: RealCluster, tmp_path: pathlib.Path
) -> None:
    cluster = queued
    hold = Hold(tmp_path / "hold-job-a")  # job-a runs until job-b was seen waiting whole
    cluster.create_job(kueue_job(cluster, "job-a", sleep=1, hold=hold))
    wait_until(
        lambda: running(cluster, "job-a") == 4,
        90,
        "job-a's gang was never admitted and run",
        lambda: (cluster.pods("job-a"), workloads(cluster)),
    )
    cluster.create_job(kueue_job(cluster, "job-b", sleep=1))
    wait_until(
        lambda: len(cluster.pods("job-b")) == 4 and NO_QUOTA in quota_message(cluster, "job-b-attempt-0"),
        60,
        "job-b's Workload never said it waits for quota",
        lambda: (cluster.pods("job-b"), workloads(cluster)),
    )
    # The queue's reason, verbatim from Kueue's Workload, in the job's status, the
    # `kubectl get ddpj` row and `ddpjob describe`.
    said = quota_message(cluster, "job-b-attempt-0")
    st = wait_until(
        lambda: (s := cluster.status("job-b")) and said in s.get("message", "") and s,
        60,
        "job-b's status never showed the queue's reason",
        lambda: cluster.status("job-b"),
    )
    assert st["phase"] == "Pending" and st["message"].startswith(f"Scheduled 0/4: Kueue queue {cluster.namespace}: ")
    condition = next(c for c in st["conditions"] if c["type"] == "GangScheduled")
    assert condition["status"] == "False" and condition["reason"] == "Queued", condition
    row = cluster.kubectl("get", "ddpj", "job-b").stdout.splitlines()[1]
    assert "Pending" in row and "Kueue queue" in row, row
    described = subprocess.run(
        [*ddpjob_command(), "describe", "job-b", f"--kubeconfig={cluster.kubeconfig}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert described.returncode == 0 and said in described.stdout, described.stdout + described.stderr
    # Whole or nothing while job-a runs: every one of job-b's Pods stays gated, none bound.
    seen = []
    try:
        while running(cluster, "job-a") == 4:
            placed, held = bound(cluster, "job-b"), gated(cluster, "job-b")
            if running(cluster, "job-a") < 4:
                break
            seen.append((placed, held))
            assert placed == 0 and held == 4, f"job-b partly admitted beside the running job-a: {seen}"
            if len(seen) >= 10:
                hold.release()
            time.sleep(0.3)
    finally:
        hold.release()
    assert len(seen) >= 10, f"job-a ended before job-b could be watched waiting: {seen}"
    cluster.wait_phase("job-a", "Succeeded", timeout=60)
    cluster.wait_phase("job-b", "Succeeded", timeout=120)


def test_a_gang_larger_than_the_quota_waits_then_fails_at_its_schedule_timeout(queued: RealCluster) -> None:
    cluster = queued
    cluster.create_job(kueue_job(cluster, "too-big", nodes=8))
    st = wait_until(
        lambda: (s := cluster.status("too-big")) and "Kueue queue" in s.get("message", "") and s,
        90,
        "too-big never reported the queue",
        lambda: (cluster.status("too-big"), workloads(cluster)),
    )
    assert st["phase"] == "Pending" and st["scheduledNodes"] == 0 and gated(cluster, "too-big") == 8
    # Kueue's words for a request above the ClusterQueue's whole quota.
    assert "insufficient quota for nvidia.com/gpu" in st["message"] and "maximum capacity (6)" in st["message"], st
    cluster.create_job(
        kueue_job(cluster, "no-room", nodes=7, scheduling={"scheduleTimeoutSeconds": 5, "onScheduleTimeout": "Fail"})
    )
    st = cluster.wait_phase("no-room", "Failed", timeout=90)
    assert "not placed within scheduleTimeoutSeconds=5" in st["message"] and "Kueue queue" in st["message"], st
    failed = next(c for c in st["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "ScheduleTimeout", failed
    wait_until(
        lambda: cluster.pods("no-room") == [] and workload(cluster, "no-room-attempt-0") is None,
        60,
        "a failed gang's Pods or Workload were left behind",
        lambda: (cluster.pods("no-room"), workloads(cluster)),
    )
    # too-big (Report, the default) keeps waiting.
    assert cluster.status("too-big")["phase"] == "Pending"


def test_deleting_a_waiting_job_removes_its_pods_and_workload(queued: RealCluster) -> None:
    cluster = queued
    cluster.create_job(kueue_job(cluster, "waiting", nodes=8))
    wait_until(
        lambda: workload(cluster, "waiting-attempt-0") is not None and gated(cluster, "waiting") == 8,
        60,
        "the waiting job's Workload was not made",
        lambda: workloads(cluster),
    )
    cluster.custom.delete_namespaced_custom_object("ddpjob.io", "v1alpha1", cluster.namespace, "ddpjobs", "waiting")
    wait_until(
        lambda: cluster.pods("waiting") == [] and workload(cluster, "waiting-attempt-0") is None,
        60,
        "the waiting job's Pods or Workload were not garbage-collected",
        lambda: (cluster.pods("waiting"), workloads(cluster)),
    )


def test_a_higher_priority_gang_preempts_and_the_victim_restarts_without_using_max_restarts(
    queued: RealCluster, tmp_path: pathlib.Path
) -> None:
    cluster = queued
    ns = cluster.namespace
    hold = Hold(tmp_path / "hold-victim")  # the victim runs until the urgent gang has finished
    cluster.create_job(
        kueue_job(
            cluster,
            "victim",
            sleep=1,
            hold=hold,
            maxRestarts=0,
            restartPolicy="OnFailure",
            scheduling={"priorityClassName": f"{ns}-low"},
        )
    )
    wait_until(lambda: running(cluster, "victim") == 4, 90, "the victim never ran", lambda: workloads(cluster))
    cluster.create_job(kueue_job(cluster, "urgent", sleep=2, scheduling={"priorityClassName": f"{ns}-high"}))
    # Kueue evicts the victim's Workload (4 + 4 GPUs > 6) and stops its Pods; the urgent
    # gang is admitted and runs; the victim restarts, waits for quota, and finishes.
    try:
        wait_until(
            lambda: cluster.status("urgent").get("phase") == "Succeeded",
            120,
            "the urgent gang never finished",
            lambda: state(cluster, "urgent") + state(cluster, "victim"),
        )
    finally:
        hold.release()
    st = wait_until(
        lambda: (s := cluster.status("victim")).get("phase") == "Succeeded" and s,
        180,
        "the victim never finished",
        lambda: state(cluster, "victim"),
    )
    assert st["disruptions"] >= 1 and st["restarts"] == st["disruptions"], st
    events = [e["message"] for e in cluster.events("victim") if e["reason"] == "Restarting"]
    assert any("not counted against maxRestarts=0" in m and "Preempted" in m for m in events), events
