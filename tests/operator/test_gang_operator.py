"""The real operator (kopf over HTTP) against the real kube-apiserver and kube-scheduler:
preemptions and evictions
restart the gang without using up maxRestarts; a gang job's PodGroup is created before its
Pods and replaced per attempt; unscheduled Pods are reported, not failed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import kubernetes
import pytest

from ddpjob_devcluster.clusters.client import json_object
from ddpjob_devcluster.clusters.operator_runner import wait_for
from tests.operator.conftest import Cluster, ddpjob
from tests.support.deadlines import REACTION, TEST

pytestmark = pytest.mark.timeout(TEST)
MERGE = "application/merge-patch+json"


def mark(cluster: Cluster, pod: str, condition: dict[str, Any]) -> None:
    """What a preempting scheduler / Kueue writes before it deletes the Pod, stamped with
    the time as they stamp it: the controller manager's disruption controller turns a
    DisruptionTarget older than 2 minutes on a Pod not being deleted to False, and one with
    no time at all is that old (under load it did so before the delete came)."""
    pod_obj = cluster.core.read_namespaced_pod(pod, cluster.ns)
    conditions = [c.to_dict() for c in ((pod_obj.status and pod_obj.status.conditions) or [])]
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    kept = [{k: v for k, v in c.items() if v is not None} for c in conditions]
    body = {"status": {"conditions": [*kept, {**condition, "lastTransitionTime": now}]}}
    cluster.core.patch_namespaced_pod_status(pod, cluster.ns, body)


@pytest.mark.parametrize(
    "condition",
    [
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": "default-scheduler: preempting to accommodate a higher priority pod",
        },
        {
            "type": "TerminationTarget",
            "status": "True",
            "reason": "WorkloadEvictedDueToPreempted",
            "message": "Preempted to accommodate a higher priority Workload",
        },
    ],
    ids=["scheduler-preemption", "kueue-preemption"],
)
def test_preemption_does_not_use_up_max_restarts(cluster: Cluster, operator: Any, condition: dict) -> None:
    cluster.start_running(ddpjob("pre", nodes=2, maxRestarts=0, restartPolicy="OnFailure"))
    for attempt in range(2):  # preempted twice, with no restarts allowed at all
        mark(cluster, "pre-1", condition)
        cluster.core.delete_namespaced_pod("pre-1", cluster.ns)
        st = cluster.run_gang("pre", 2, attempt=attempt + 1)
        assert st["disruptions"] == attempt + 1
        assert st["lastFailure"]["reason"] == condition["reason"]
    cluster.set_phase("pre", "Succeeded")
    st = cluster.wait_phase("pre", "Succeeded")
    assert st["restarts"] == 2 and st["disruptions"] == 2


def test_a_pod_deleted_by_hand_still_counts(cluster: Cluster, operator: Any) -> None:
    cluster.start_running(ddpjob("byhand", nodes=2, maxRestarts=0, restartPolicy="OnFailure"))
    cluster.core.delete_namespaced_pod("byhand-1", cluster.ns)
    st = cluster.wait_phase("byhand", "Failed")
    assert "maxRestarts=0 reached" in st["message"] and "disruptions" not in st


def test_unschedulable_pods_are_reported(cluster: Cluster, operator: Any) -> None:
    # No Node has a GPU: kube-scheduler says why on each Pod (its PodScheduled condition).
    cluster.create(ddpjob("wait", nodes=2, gpusPerNode=1, scheduling={"scheduleTimeoutSeconds": 1}))
    cluster.wait_pods("wait", 2)

    def unschedulable() -> str | None:
        for pod in cluster.pods("wait"):
            said = [c for c in pod["status"].get("conditions") or [] if c["type"] == "PodScheduled"]
            if not said or said[0].get("reason") != "Unschedulable":
                return None
        return said[0]["message"]

    message = wait_for(unschedulable, timeout=REACTION, message="kube-scheduler did not mark the Pods")
    assert "Insufficient nvidia.com/gpu" in message
    cluster.wait_phase("wait", "Pending", scheduledNodes=0)
    # The job's message carries the scheduler's words; with a 1 s timeout it is prefixed
    # with the timeout's within about a second, so either form is the report looked for.
    said = wait_for(lambda: "Scheduled 0/2: " in (m := cluster.status("wait")["message"]) and m, timeout=REACTION)
    assert "Insufficient nvidia.com/gpu" in said
    cluster.wait_event("wait", "ScheduleTimeout")
    st = cluster.status("wait")
    cond = next(c for c in st["conditions"] if c["type"] == "GangScheduled")
    assert cond["status"] == "False" and cond["reason"] == "ScheduleTimeout" and message in cond["message"]
    assert st["phase"] == "Pending" and st["restarts"] == 0


def pod_group(cluster: Cluster, name: str) -> dict[str, Any] | None:
    """A native PodGroup (scheduling.k8s.io/v1beta1, served with the GenericWorkload gate)."""
    try:
        return json_object(
            cluster.custom.get_namespaced_custom_object("scheduling.k8s.io", "v1beta1", cluster.ns, "podgroups", name)
        )
    except kubernetes.client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_pod_groups_come_first_and_per_attempt(cluster: Cluster, operator: Any) -> None:
    cluster.start_running(ddpjob("pg", nodes=2, restartPolicy="OnFailure", scheduling={"gang": "kubernetes"}))
    creates = [r for r in cluster.requests if r.verb == "create" and r.resource in ("pods", "podgroups")]
    assert [r.resource for r in creates][:3] == ["podgroups", "pods", "pods"]  # the PodGroup first
    group = pod_group(cluster, "pg-attempt-0")
    assert group is not None
    assert group["spec"]["schedulingPolicy"]["gang"]["minCount"] == 2
    assert group["metadata"]["ownerReferences"][0]["name"] == "pg"
    cluster.set_phase("pg", "Failed", ranks=[1], exit_code=1)
    cluster.run_gang("pg", 2, attempt=1)
    assert pod_group(cluster, "pg-attempt-0") is None
    assert pod_group(cluster, "pg-attempt-1")
    for pod in cluster.pods("pg"):
        assert pod["spec"]["schedulingGroup"] == {"podGroupName": "pg-attempt-1"}
    cluster.patch_spec("pg", suspend=True)
    cluster.wait_phase("pg", "Suspended")
    wait_for(
        lambda: pod_group(cluster, "pg-attempt-1") is None,
        timeout=REACTION,
    )
    cluster.patch_spec("pg", suspend=False)
    cluster.run_gang("pg", 2, attempt=1)
    assert pod_group(cluster, "pg-attempt-1")
