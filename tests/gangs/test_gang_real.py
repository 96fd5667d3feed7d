"""Gang scheduling on real upstream schedulers, one scenario set per integration:

- `gang: kubernetes`: kube-scheduler v1.37.2's GangScheduling plugin. The worker's control
  plane runs with the GenericWorkload feature gate and the `scheduling.k8s.io/v1beta1` API
  (the dev cluster's defaults), so the PodGroup the operator renders is served by
  kube-apiserver and honoured by the scheduler, not by our reading of it.
- `gang: coscheduling`: scheduler-plugins' Coscheduling in a second kube-scheduler built
  from its module (`controlplane/coscheduling.py`), its PodGroup CRD from the same module.

Six 1-GPU process-kubelet Nodes; the chart installed with `gang.<integration>.enabled`,
so its RBAC for that integration's PodGroups is the one tested.
"""

from __future__ import annotations

import pathlib
import sys
import time
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from ddpjob_devcluster.clusters.client import json_object, read_metrics, wait_until
from ddpjob_devcluster.clusters.real import RealCluster
from ddpjob_devcluster.controlplane.node import NodeShape
from tests.support.control_plane import real_cluster
from tests.support.hold import SCRIPT, Hold, env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

GPU_NODES = tuple(NodeShape(f"gpu-{i}", cpu="8", memory="32Gi", gpus=1) for i in range(6))
# Each integration's PodGroup (group, version), its minimum-count field, and what its
# scheduler says of a gang that cannot be placed (its own words, read from a run).
INTEGRATIONS = {
    "kubernetes": (
        ("scheduling.k8s.io", "v1beta1"),
        lambda g: g["spec"]["schedulingPolicy"]["gang"]["minCount"],
        "minCount ({n}) cannot be satisfied",
    ),
    "coscheduling": (("scheduling.x-k8s.io", "v1alpha1"), lambda g: g["spec"]["minMember"], None),
}


@pytest.fixture(params=list(INTEGRATIONS))
def gang(request: pytest.FixtureRequest) -> str:
    if request.param == "coscheduling":
        request.getfixturevalue("coscheduling_scheduler")
    return request.param


@pytest.fixture
def gang_cluster(request: pytest.FixtureRequest, tmp_path: pathlib.Path, gang: str) -> Iterator[RealCluster]:
    with real_cluster(
        request, tmp_path / "cluster", nodes=GPU_NODES, values={"gang": {gang: {"enabled": True}}}
    ) as real:
        yield real


def gang_job(
    name: str, gang: str, nodes: int = 4, sleep: float = 4, hold: Hold | None = None, **scheduling: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {"name": name},
        "spec": {
            "nodes": nodes,
            "nprocPerNode": 1,
            "gpusPerNode": 1,
            "backend": "gloo",
            "image": "ddpjob/trainer:test",
            "command": [sys.executable, "-c", SCRIPT],
            "env": env(sleep, hold),
            "restartBackoffSeconds": 0,
            "scheduling": {"gang": gang, **scheduling},
        },
    }


def bound(cluster: RealCluster, job: str) -> int:
    return sum(1 for p in cluster.pods(job) if (p.get("spec") or {}).get("nodeName"))


def running(cluster: RealCluster, job: str) -> int:
    return sum(1 for p in cluster.pods(job) if (p.get("status") or {}).get("phase") == "Running")


def waits_whole_beside(cluster: RealCluster, waiting: str, running_job: str, hold: Hold, looks: int = 10) -> None:
    """While `running_job`'s 4 Pods run, none of `waiting`'s 4 Pods is bound: all or
    nothing (without a gang, 2 of them would sit on the free GPUs, waiting). The running
    job is held until `looks` reads have seen it, then released to end on its own."""
    wait_until(lambda: len(cluster.pods(waiting)) == 4, 60, f"{waiting}'s Pods were not created")
    seen = []
    try:
        while running(cluster, running_job) == 4:
            placed = bound(cluster, waiting)
            if running(cluster, running_job) < 4:
                break  # it ended between the two reads: the waiting gang may be binding now
            seen.append(placed)
            assert placed == 0, f"{waiting} partly placed beside the running {running_job}: {seen}"
            if len(seen) >= looks:
                hold.release()
            time.sleep(0.3)
    finally:
        hold.release()
    assert len(seen) >= looks, f"{running_job} ended before {waiting}'s Pods could be watched waiting: {seen}"


def pod_groups(cluster: RealCluster, gang: str) -> list[dict[str, Any]]:
    (group, version), _, _ = INTEGRATIONS[gang]
    custom = kubernetes.client.CustomObjectsApi(cluster.api)
    return json_object(custom.list_namespaced_custom_object(group, version, cluster.namespace, "podgroups"))["items"]


def test_two_gangs_on_six_gpus_never_deadlock_the_second_waits_whole(
    gang_cluster: RealCluster, gang: str, tmp_path: pathlib.Path
) -> None:
    cluster = gang_cluster
    hold = Hold(tmp_path / "hold-job-a")
    cluster.create_job(gang_job("job-a", gang, sleep=1, hold=hold))
    wait_until(lambda: running(cluster, "job-a") == 4, 60, "job-a's gang never ran", lambda: cluster.pods("job-a"))
    cluster.create_job(gang_job("job-b", gang, sleep=1))
    waits_whole_beside(cluster, "job-b", "job-a", hold)
    cluster.wait_phase("job-b", "Succeeded", timeout=90)
    wait_until(
        lambda: not any(g["metadata"]["name"].startswith("job-a") for g in pod_groups(cluster, gang)),
        30,
        "job-a's PodGroup outlived its attempt",
        lambda: pod_groups(cluster, gang),
    )


def test_a_gang_larger_than_the_cluster_waits_with_the_schedulers_reason(gang_cluster: RealCluster, gang: str) -> None:
    cluster = gang_cluster
    _, min_count, words = INTEGRATIONS[gang]
    cluster.create_job(gang_job("too-big", gang, nodes=8))
    # The scheduler writes why on the Pods' PodScheduled condition; the job carries the
    # first one, as README's "Running on a shared cluster" says.
    expected = words.format(n=8) if words else "Scheduled 0/8: "
    st = wait_until(
        lambda: (
            (s := cluster.status("too-big"))
            and expected in s.get("message", "")
            and "not yet scheduled" not in s["message"]
            and s
        ),
        60,
        "too-big never reported the scheduler's reason",
        lambda: cluster.status("too-big"),
    )
    assert st["phase"] == "Pending" and st["message"].startswith("Scheduled 0/8: ") and st["scheduledNodes"] == 0
    condition = next(c for c in st["conditions"] if c["type"] == "GangScheduled")
    assert condition["status"] == "False" and condition["reason"] == "Unschedulable", condition
    assert bound(cluster, "too-big") == 0
    assert [min_count(g) for g in pod_groups(cluster, gang)] == [8]
    row = cluster.kubectl("get", "ddpj", "too-big").stdout.splitlines()[1]
    assert "Pending" in row and "Scheduled 0/8" in row
    # Deleting the waiting job takes its PodGroup and Pods with it (owner references, the real GC).
    cluster.custom.delete_namespaced_custom_object("ddpjob.io", "v1alpha1", cluster.namespace, "ddpjobs", "too-big")
    wait_until(
        lambda: pod_groups(cluster, gang) == [] and cluster.pods("too-big") == [],
        60,
        "the waiting job's PodGroup or Pods were not garbage-collected",
        lambda: pod_groups(cluster, gang),
    )


def test_schedule_timeout_fail_ends_a_gang_that_cannot_be_placed(gang_cluster: RealCluster, gang: str) -> None:
    cluster = gang_cluster
    cluster.create_job(gang_job("no-room", gang, nodes=7, scheduleTimeoutSeconds=5, onScheduleTimeout="Fail"))
    st = cluster.wait_phase("no-room", "Failed", timeout=90)
    assert "not placed within scheduleTimeoutSeconds=5" in st["message"] and "Scheduled 0/7" in st["message"], st
    failed = next(c for c in st["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True" and failed["reason"] == "ScheduleTimeout", failed
    wait_until(
        lambda: any(
            e["type"] == "Warning" and "scheduleTimeoutSeconds=5" in e["message"] for e in cluster.events("no-room")
        ),
        20,
        "no Warning Event says why the job failed",
        lambda: [e["message"] for e in cluster.events("no-room")],
    )
    wait_until(
        lambda: cluster.pods("no-room") == [] and pod_groups(cluster, gang) == [],
        60,
        "a failed gang's Pods or PodGroup were left behind",
        lambda: cluster.pods("no-room"),
    )


@pytest.fixture
def priority_classes(gang_cluster: RealCluster) -> Iterator[None]:
    """`ddpjob-low` and `ddpjob-high` (cluster-scoped; the worker's plane is shared by its
    tests in turn, so made anew and deleted after)."""
    scheduling = kubernetes.client.SchedulingV1Api(gang_cluster.api)
    for name, value in (("ddpjob-low", 100), ("ddpjob-high", 1000)):
        scheduling.create_priority_class({"metadata": {"name": name}, "value": value})  # type: ignore[arg-type]  # a dict body: the client sends it as it is
    yield
    for name in ("ddpjob-low", "ddpjob-high"):
        scheduling.delete_priority_class(name)


@pytest.mark.timeout(360)
def test_a_higher_priority_gang_preempts_and_the_victim_resumes_from_its_checkpoint(
    gang_cluster: RealCluster, gang: str, priority_classes: None
) -> None:
    cluster = gang_cluster
    # The victim: the built-in trainer, 4 nodes x 1 process, steps of 0.2 s or more, a
    # checkpoint every 8 steps (64 steps in all), no gang restart allowed (maxRestarts 0): a preemption is a
    # disruption, not a failure of the job, so it must not count.
    victim = gang_job("low", gang, priorityClassName="ddpjob-low")
    victim["spec"].update(
        command=["ddpjob-launch"],
        maxRestarts=0,
        checkpoint={"claimName": "ckpt"},
        env=[{"name": "DDPJOB_TEST_STEP_SECONDS", "value": "0.2"}],
        args=[
            "ddpjob-train",
            "--epochs",
            "2",
            "--synthetic-size",
            "4096",
            "--batch-size",
            "32",
            "--checkpoint-every-steps",
            "8",
            "--log-every",
            "4",
            "--eval-every",
            "0",
        ],
    )
    cluster.create_job(victim)
    kubelet = cluster.kubelet
    assert kubelet is not None  # started
    wait_until(
        lambda: any(p.suffix == ".pt" for p in kubelet.checkpoint_dir("low").glob("ckpt-*")),
        180,
        "the victim never wrote a checkpoint",
        lambda: cluster.status("low"),
    )
    # The preemptor needs 4 of the 6 GPUs; 2 are free, so the scheduler must evict 2 of
    # the victim's Pods (DisruptionTarget: PreemptionByScheduler).
    cluster.create_job(gang_job("high", gang, sleep=3, priorityClassName="ddpjob-high"))
    cluster.wait_phase("high", "Succeeded", timeout=120)
    # A victim Pod that coscheduling's PreFilter rejects (its PodGroup backing off) is queued
    # again only on a Pod add or a PodGroup change, or by kube-scheduler's flush of pods
    # unschedulable for 5 min (DefaultPodMaxInUnschedulablePodsDuration): the preemptor's end
    # is neither, so the victim can wait those 5 minutes, as it would on any cluster.
    st = cluster.wait_phase("low", "Succeeded", timeout=480)
    assert st["disruptions"] == 1 and st["restarts"] == 1, st
    assert st["lastFailure"]["reason"] == "PreemptionByScheduler", st["lastFailure"]
    events = cluster.events("low")
    assert any(e["type"] == "Warning" and "PreemptionByScheduler" in e["message"] for e in events), [
        e["message"] for e in events
    ]
    # Attempt 1 started from the newest checkpoint, not from step 0.
    records = read_metrics(kubelet.checkpoint_dir("low") / "metrics.jsonl")
    resumes = [r for r in records if r["event"] == "resume"]
    assert len(resumes) == 1 and resumes[0]["restart"] == 1 and resumes[0]["step"] >= 8, resumes
    final = [r for r in records if r["event"] == "final"]
    assert len(final) == 1 and final[0]["restart"] == 1 and final[0]["step"] == 64, final
