"""Native gang scheduling (`spec.scheduling.gang: kubernetes`) on the real kube-scheduler 1.37.

The worker's control plane runs with the GenericWorkload feature gate and the
`scheduling.k8s.io/v1beta1` API (the dev cluster's defaults), so the PodGroup the operator
renders is served by kube-apiserver and honoured by kube-scheduler's GangScheduling plugin,
not by our reading of it. Six 1-GPU process-kubelet Nodes; the chart installed with
`gang.kubernetes.enabled`, so its RBAC for PodGroups is the one tested.
"""
from __future__ import annotations

import pathlib
import sys
import time
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from ddpjob_devcluster.cluster import wait_until
from ddpjob_devcluster.controlplane.node import NodeShape
from ddpjob_devcluster.real_cluster import RealCluster
from tests.support.control_plane import real_cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

GPU_NODES = tuple(NodeShape(f'gpu-{i}', cpu='8', memory='32Gi', gpus=1) for i in range(6))
SCRIPT = "import os, time; print('node', os.environ['NODE_RANK'], flush=True); time.sleep(float(os.environ['SLEEP']))"


@pytest.fixture
def gang_cluster(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[RealCluster]:
    with real_cluster(request, tmp_path / 'cluster', nodes=GPU_NODES,
                      values={'gang': {'kubernetes': {'enabled': True}}}) as real:
        yield real


def gang_job(name: str, nodes: int = 4, sleep: float = 4, **scheduling: Any) -> dict[str, Any]:
    return {"apiVersion": "ddpjob.io/v1alpha1", "kind": "DDPJob", "metadata": {"name": name},
            "spec": {"nodes": nodes, "nprocPerNode": 1, "gpusPerNode": 1, "backend": "gloo",
                     "image": "ddpjob/trainer:test", "command": [sys.executable, "-c", SCRIPT],
                     "env": [{"name": "SLEEP", "value": str(sleep)}], "restartBackoffSeconds": 0,
                     "scheduling": {"gang": "kubernetes", **scheduling}}}


def bound(cluster: RealCluster, job: str) -> int:
    return sum(1 for p in cluster.pods(job) if (p.get('spec') or {}).get('nodeName'))


def pod_groups(cluster: RealCluster) -> list[dict[str, Any]]:
    custom = kubernetes.client.CustomObjectsApi(cluster.api)
    return custom.list_namespaced_custom_object('scheduling.k8s.io', 'v1beta1', cluster.namespace, 'podgroups')['items']


def test_two_gangs_on_six_gpus_never_deadlock_the_second_waits_whole(gang_cluster: RealCluster) -> None:
    cluster = gang_cluster
    cluster.create_job(gang_job("job-a", sleep=6))
    wait_until(lambda: bound(cluster, "job-a") == 4, 60, "job-a's gang was never placed",
               lambda: cluster.pods("job-a"))
    cluster.create_job(gang_job("job-b", sleep=1))
    # While job-a holds 4 of the 6 GPUs, job-b's 4 Pods exist but none is bound:
    # all or nothing (without the gang, 2 of them would sit on the free GPUs).
    wait_until(lambda: len(cluster.pods("job-b")) == 4, 60, "job-b's Pods were not created")
    seen = []
    while cluster.status("job-a").get("phase") != "Succeeded":
        seen.append(bound(cluster, "job-b"))
        assert seen[-1] in (0, 4), f"job-b partly placed: {seen}"
        time.sleep(0.3)
    assert 0 in seen, f"job-b was never seen waiting whole: {seen}"
    cluster.wait_phase("job-b", "Succeeded", timeout=90)
    groups = {g['metadata']['name']: g for g in pod_groups(cluster)}
    assert not any(name.startswith("job-a") for name in groups), "job-a's PodGroup outlived its attempt"


def test_a_gang_larger_than_the_cluster_waits_with_the_schedulers_reason(gang_cluster: RealCluster) -> None:
    cluster = gang_cluster
    cluster.create_job(gang_job("too-big", nodes=8))
    # kube-scheduler's GangScheduling plugin writes why on every Pod's PodScheduled
    # condition; the job carries the first one, as README's "Running on a shared cluster" says.
    st = wait_until(lambda: (s := cluster.status("too-big")) and "minCount (8) cannot be satisfied" in s.get("message", "")
                    and s, 60, "too-big never reported the scheduler's reason", lambda: cluster.status("too-big"))
    assert st["phase"] == "Pending" and st["message"].startswith("Scheduled 0/8: ") and st["scheduledNodes"] == 0
    gang = next(c for c in st["conditions"] if c["type"] == "GangScheduled")
    assert gang["status"] == "False" and gang["reason"] == "Unschedulable"
    assert bound(cluster, "too-big") == 0
    assert [g['spec']['schedulingPolicy']['gang']['minCount'] for g in pod_groups(cluster)] == [8]
    row = cluster.kubectl("get", "ddpj", "too-big").stdout.splitlines()[1]
    assert "Pending" in row and "minCount (8)" in row
    # Deleting the waiting job takes its PodGroup and Pods with it (owner references, the real GC).
    cluster.custom.delete_namespaced_custom_object('ddpjob.io', 'v1alpha1', cluster.namespace, 'ddpjobs', 'too-big')
    wait_until(lambda: pod_groups(cluster) == [] and cluster.pods("too-big") == [], 60,
               "the waiting job's PodGroup or Pods were not garbage-collected", lambda: pod_groups(cluster))


def test_schedule_timeout_fail_ends_a_gang_that_cannot_be_placed(gang_cluster: RealCluster) -> None:
    cluster = gang_cluster
    cluster.create_job(gang_job("no-room", nodes=7, scheduleTimeoutSeconds=5, onScheduleTimeout="Fail"))
    st = cluster.wait_phase("no-room", "Failed", timeout=90)
    assert "not placed within scheduleTimeoutSeconds=5" in st["message"] and "minCount (7)" in st["message"], st
    failed = next(c for c in st["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True" and failed["reason"] == "ScheduleTimeout", failed
    wait_until(lambda: any(e["type"] == "Warning" and "scheduleTimeoutSeconds=5" in e["message"]
                           for e in cluster.events("no-room")), 20, "no Warning Event says why the job failed",
               lambda: [e["message"] for e in cluster.events("no-room")])
    wait_until(lambda: cluster.pods("no-room") == [] and pod_groups(cluster) == [], 60,
               "a failed gang's Pods or PodGroup were left behind", lambda: cluster.pods("no-room"))
