"""`gang: volcano` on the real Volcano: its scheduler (vc-scheduler) and controllers
(vc-controller-manager) built from the pinned `volcano.sh/volcano` module and started
beside the worker's real control plane (`controlplane/volcano.py`), with its CRDs and its
chart's RBAC. Six 1-GPU process-kubelet Nodes; the operator installed from our chart with
`gang.volcano.enabled`, so the chart's RBAC for Volcano PodGroups is the one tested.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from ddpjob_devcluster.clusters.client import json_object, wait_until
from ddpjob_devcluster.clusters.real import RealCluster
from ddpjob_devcluster.controlplane import volcano as vc
from tests.gangs.test_gang_real import GPU_NODES, Hold, bound, gang_job, running, waits_whole_beside
from tests.support.control_plane import real_cluster
from tests.system.test_cluster_workflow import ddpjob

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

GROUP, VERSION = "scheduling.volcano.sh", "v1beta1"


@pytest.fixture
def volcano(volcano_scheduler: vc.Volcano) -> vc.Volcano:
    return volcano_scheduler


@pytest.fixture
def cluster(request: pytest.FixtureRequest, tmp_path: pathlib.Path, volcano: vc.Volcano) -> Iterator[RealCluster]:
    with real_cluster(
        request, tmp_path / "cluster", nodes=GPU_NODES, values={"gang": {"volcano": {"enabled": True}}}
    ) as real:
        yield real


def job(name: str, nodes: int = 4, sleep: float = 4, hold: Hold | None = None, **scheduling: Any) -> dict[str, Any]:
    return gang_job(name, "volcano", nodes=nodes, sleep=sleep, hold=hold, **scheduling)


def pod_groups(cluster: RealCluster) -> list[dict[str, Any]]:
    return json_object(cluster.custom.list_namespaced_custom_object(GROUP, VERSION, cluster.namespace, "podgroups"))[
        "items"
    ]


def waiting_message(cluster: RealCluster, name: str, words: str) -> dict[str, Any]:
    """The job's status once its message carries `words` (Volcano's own)."""
    return wait_until(
        lambda: (s := cluster.status(name)) and words in s.get("message", "") and s,
        60,
        f"{name} never said {words!r}",
        lambda: (cluster.status(name), pod_groups(cluster)),
    )


def test_two_gangs_on_six_gpus_never_deadlock_the_second_waits_whole(
    cluster: RealCluster, tmp_path: pathlib.Path
) -> None:
    hold = Hold(tmp_path / "hold-job-a")
    cluster.create_job(job("job-a", sleep=1, hold=hold))
    wait_until(lambda: running(cluster, "job-a") == 4, 60, "job-a's gang never ran", lambda: cluster.pods("job-a"))
    cluster.create_job(job("job-b", sleep=1))
    waits_whole_beside(cluster, "job-b", "job-a", hold)
    cluster.wait_phase("job-b", "Succeeded", timeout=90)
    assert cluster.status("job-a")["phase"] == "Succeeded"
    wait_until(
        lambda: pod_groups(cluster) == [], 30, "the finished jobs' PodGroups outlived them", lambda: pod_groups(cluster)
    )


def test_a_gang_larger_than_the_cluster_waits_with_volcanos_reason_then_times_out(cluster: RealCluster) -> None:
    cluster.create_job(job("too-big", nodes=8))
    # Volcano's enqueue verdict (overcommit: 8 GPUs > 6 x 1.2) comes first, read from the
    # PodGroup's Event; then what Volcano wrote on the Pods.
    st = waiting_message(
        cluster,
        "too-big",
        "Scheduled 0/8: queue default: resource in cluster is overused; "
        "pod group is not ready, 8 Pending, 8 minAvailable",
    )
    assert st["phase"] == "Pending" and st["scheduledNodes"] == 0 and bound(cluster, "too-big") == 0
    condition = next(c for c in st["conditions"] if c["type"] == "GangScheduled")
    assert condition["status"] == "False" and condition["reason"] == "Unschedulable", condition
    [group] = pod_groups(cluster)
    assert group["spec"]["minMember"] == 8 and group["spec"]["minResources"]["nvidia.com/gpu"] == "8"
    assert group["status"]["phase"] == "Pending", group["status"]
    row = cluster.kubectl("get", "ddpj", "too-big").stdout.splitlines()[1]
    assert "Pending" in row and "resource in cluster is overused" in row, row
    cluster.create_job(job("no-room", nodes=7, scheduleTimeoutSeconds=5, onScheduleTimeout="Fail"))
    st = cluster.wait_phase("no-room", "Failed", timeout=90)
    assert "not placed within scheduleTimeoutSeconds=5" in st["message"] and "Scheduled 0/7" in st["message"], st
    failed = next(c for c in st["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "ScheduleTimeout", failed
    wait_until(
        lambda: any(
            e["type"] == "Warning" and "scheduleTimeoutSeconds=5" in e["message"] for e in cluster.events("no-room")
        ),
        20,
        "no Warning Event says why the job failed",
    )
    wait_until(
        lambda: cluster.pods("no-room") == [] and len(pod_groups(cluster)) == 1,
        60,
        "a failed gang's Pods or PodGroup were left behind",
        lambda: pod_groups(cluster),
    )


def test_a_queue_at_capacity_holds_the_job_with_the_queues_reason(cluster: RealCluster) -> None:
    queue = f"two-gpus-{cluster.namespace}"
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Queue",
        "metadata": {"name": queue},
        "spec": {"weight": 1, "capability": {"nvidia.com/gpu": "2"}},
    }
    cluster.custom.create_cluster_custom_object(GROUP, VERSION, "queues", body)
    try:
        cluster.create_job(job("queued", nodes=4, queue=queue))
        words = f"queue {queue}: queue resource quota insufficient"
        st = waiting_message(cluster, "queued", f"Scheduled 0/4: {words}; pod group is not ready")
        assert st["phase"] == "Pending" and bound(cluster, "queued") == 0
        row = cluster.kubectl("get", "ddpj", "queued").stdout.splitlines()[1]
        assert "Pending" in row and words in row, row
        described = ddpjob(cluster, "describe", "queued")
        assert described.returncode == 0, described.stderr
        assert f"message:         Scheduled 0/4: {words}" in described.stdout, described.stdout
        assert "GangScheduled  False   Unschedulable" in described.stdout, described.stdout
        # Room in the queue: Volcano admits the gang, and the job says so without a Pod changing first.
        cluster.custom.patch_cluster_custom_object(
            GROUP, VERSION, "queues", queue, {"spec": {"capability": {"nvidia.com/gpu": "4"}}}
        )
        st = cluster.wait_phase("queued", "Succeeded", timeout=120)
        assert st["restarts"] == 0, st
    finally:
        cluster.custom.delete_cluster_custom_object(GROUP, VERSION, "queues", queue)


def test_deleting_a_waiting_job_collects_its_pod_group_and_pods(cluster: RealCluster) -> None:
    cluster.create_job(job("waiting", nodes=8))
    wait_until(lambda: len(cluster.pods("waiting")) == 8 and pod_groups(cluster), 60, "the job's Pods never came")
    cluster.custom.delete_namespaced_custom_object("ddpjob.io", "v1alpha1", cluster.namespace, "ddpjobs", "waiting")
    wait_until(
        lambda: pod_groups(cluster) == [] and cluster.pods("waiting") == [],
        60,
        "the waiting job's PodGroup or Pods were not garbage-collected",
        lambda: pod_groups(cluster),
    )


@pytest.fixture
def priorities(cluster: RealCluster) -> Iterator[tuple[str, str]]:
    """A low and a high PriorityClass of the test's own (cluster-scoped), deleted after."""
    scheduling = kubernetes.client.SchedulingV1Api(cluster.api)
    made = []
    for level, value in (("low", 100), ("high", 1000)):
        name = f"{cluster.namespace}-{level}"
        scheduling.create_priority_class({"metadata": {"name": name}, "value": value})  # type: ignore[arg-type]  # a dict body: the client sends it as it is
        made.append(name)
    yield made[0], made[1]
    for name in made:
        scheduling.delete_priority_class(name)


def test_a_higher_priority_gang_preempts_the_victim_restarts_later_without_using_max_restarts(
    cluster: RealCluster, volcano: vc.Volcano, priorities: tuple[str, str], tmp_path: pathlib.Path
) -> None:
    low, high = priorities
    hold = Hold(tmp_path / "hold-victim")  # the victim runs until the urgent gang has finished
    with volcano.actions(vc.PREEMPTING):
        victim = job("victim", nodes=6, sleep=1, hold=hold, priorityClassName=low)
        victim["spec"]["maxRestarts"] = 0
        cluster.create_job(victim)
        wait_until(lambda: running(cluster, "victim") == 6, 60, "the victim never ran", lambda: cluster.pods("victim"))
        cluster.create_job(job("urgent", nodes=4, sleep=2, priorityClassName=high))
        try:
            urgent = cluster.wait_phase("urgent", "Succeeded", timeout=120)
        finally:
            hold.release()
        victim = cluster.wait_phase("victim", "Succeeded", timeout=120)
    assert urgent["restarts"] == 0, urgent
    # Volcano evicted the victim's Pods (Ready=False, reason Evict, then deleted): a
    # disruption, so maxRestarts: 0 did not end the job; its second attempt ran once the
    # urgent job had finished (6 GPUs needed, 4 held until then).
    assert victim["restarts"] == 1 and victim["disruptions"] == 1, victim
    assert victim["lastFailure"]["reason"] == "Evict", victim["lastFailure"]
    assert victim["lastFailure"]["message"] == "Pod is evicted, because of preempt", victim["lastFailure"]
    placed = next(c for c in victim["conditions"] if c["type"] == "GangScheduled")
    assert placed["lastTransitionTime"] >= urgent["completionTime"], (placed, urgent["completionTime"])
    restarting = [e["message"] for e in cluster.events("victim") if e["reason"] == "Restarting"]
    assert (
        restarting and "because of preempt" in restarting[0] and "not counted against maxRestarts=0" in restarting[0]
    ), restarting


def test_with_volcanos_default_actions_a_higher_priority_gang_waits_instead(
    cluster: RealCluster, priorities: tuple[str, str], tmp_path: pathlib.Path
) -> None:
    """Upstream's own e2e: with the enqueue action, a gang that does not fit the idle
    resources stays Pending, and preempt skips Pending PodGroups."""
    low, high = priorities
    hold = Hold(tmp_path / "hold-victim")  # the victim runs until the urgent gang was seen waiting
    cluster.create_job(job("victim", nodes=6, sleep=1, hold=hold, priorityClassName=low))
    wait_until(lambda: running(cluster, "victim") == 6, 60, "the victim never ran", lambda: cluster.pods("victim"))
    cluster.create_job(job("urgent", nodes=4, sleep=1, priorityClassName=high))
    try:
        st = waiting_message(cluster, "urgent", "queue default: resource in cluster is overused")
        assert bound(cluster, "urgent") == 0 and running(cluster, "victim") == 6, st
    finally:
        hold.release()
    victim = cluster.wait_phase("victim", "Succeeded", timeout=90)
    assert victim["restarts"] == 0 and "disruptions" not in victim, victim
    cluster.wait_phase("urgent", "Succeeded", timeout=90)
