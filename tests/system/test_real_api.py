"""What only a real API server can show: the operator, installed from the chart and
acting with its RBAC, against upstream kube-apiserver's admission (ResourceQuota,
PodSecurity, Pod validation), the CRD's schema, defaults, CEL rules and printer columns
as the server applies them, server-side apply, the garbage collector, and the job's
life (suspend/resume, deadline, TTL, delete) with short `python -c` jobs.

Several of these once repeated a test of the retired API emulator on the real server
with the same expected messages: where they passed only on the emulator, the emulator
was wrong (docs/divergences.md).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from typing import Any

import kubernetes
import pytest
import yaml

from ddpjob import render
from ddpjob.api.spec import parse_job
from ddpjob_devcluster.clusters.client import wait_until
from ddpjob_devcluster.clusters.real import RealCluster
from tests.support.deadlines import CLUSTER_TEST, PHASE, REACTION
from tests.support.hold import SCRIPT, Hold, env

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "manifests" / "examples"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(CLUSTER_TEST)]


def job(name: str, nodes: int = 2, sleep: float = 0, hold: Hold | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {"name": name},
        "spec": {
            "nodes": nodes,
            "nprocPerNode": 1,
            "image": "ddpjob/trainer:test",
            "command": [sys.executable, "-c", SCRIPT],
            "restartBackoffSeconds": 0,
            "env": env(sleep, hold),
            **spec,
        },
    }


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c["type"] == kind), {})


def waiting_for(cluster: RealCluster, name: str, text: str, timeout: float = 30) -> dict[str, Any]:
    return wait_until(
        lambda: (s := cluster.status(name)) and text in s.get("message", "") and s,
        timeout,
        f"{name} never said {text!r}",
        lambda: cluster.status(name),
    )


def apply(
    cluster: RealCluster, tmp_path: pathlib.Path, body: dict[str, Any], *args: str, check: bool = True
) -> subprocess.CompletedProcess:
    path = tmp_path / f"{body['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(body))
    return cluster.kubectl("apply", "-f", str(path), *args, check=check)


# ---- admission -------------------------------------------------------------------------


def test_a_job_over_a_real_resource_quota_says_why_it_waits_then_runs(cluster: RealCluster) -> None:
    cluster.core.create_namespaced_resource_quota(
        cluster.namespace,
        {"metadata": {"name": "one-pod"}, "spec": {"hard": {"pods": "1"}}},  # type: ignore[arg-type]  # a dict body: the client sends it as it is
    )
    hold = Hold(cluster.workdir / "hold-quota")
    cluster.create_job(job("quota", hold=hold))  # Pod 0 holds the quota while the test looks
    st = waiting_for(cluster, "quota", "exceeded quota")
    assert st["phase"] == "Pending" and st["message"].startswith("1/2 Pods created; waiting: ")
    assert (
        'pods "quota-1" is forbidden: exceeded quota: one-pod, requested: pods=1, used: pods=1, limited: pods=1'
        in st["message"]
    )
    assert condition(st, "PodsCreated")["reason"] == "Forbidden"
    row = cluster.kubectl("get", "ddpj", "quota").stdout.splitlines()[1]
    assert "Pending" in row and "exceeded quota" in row
    described = cluster.kubectl("describe", "ddpj", "quota").stdout
    assert "PodsCreated" in described and "FailedCreatePod" in described
    cluster.core.patch_namespaced_resource_quota("one-pod", cluster.namespace, {"spec": {"hard": {"pods": "4"}}})
    cluster.wait_phase("quota", "Running", timeout=PHASE, readyNodes=2)
    hold.release()
    cluster.wait_phase("quota", "Succeeded", timeout=PHASE)


def test_a_restricted_namespace_runs_the_rendered_pods_and_refuses_a_loosened_template(cluster: RealCluster) -> None:
    cluster.core.patch_namespace(
        cluster.namespace, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}
    )
    cluster.create_job(job("locked", checkpoint={"claimName": "ckpt"}))
    cluster.wait_phase("locked", "Succeeded", timeout=PHASE)

    cluster.create_job(job("loose", nodes=1, template={"spec": {"securityContext": {"runAsNonRoot": False}}}))
    st = waiting_for(cluster, "loose", "violates PodSecurity")
    assert "pod must not set securityContext.runAsNonRoot=false" in st["message"]
    assert condition(st, "PodsCreated")["reason"] == "Forbidden"


@pytest.mark.parametrize(
    "example", sorted(p.name for p in EXAMPLES.glob("*.yaml") if yaml.safe_load(p.read_text()).get("kind") == "DDPJob")
)
def test_every_examples_rendered_pods_pass_the_restricted_standard(
    cluster: RealCluster, example: str, tmp_path: pathlib.Path
) -> None:
    """The real PodSecurity admission, not our reading of it: each example's Pods, as the
    operator renders them into this namespace, created with `--dry-run=server` (admission
    runs, nothing is stored or scheduled) in a namespace that enforces `restricted`."""
    cluster.core.patch_namespace(
        cluster.namespace,
        {
            "metadata": {
                "labels": {
                    "pod-security.kubernetes.io/enforce": "restricted",
                    "pod-security.kubernetes.io/enforce-version": "latest",
                }
            }
        },
    )
    body = yaml.safe_load((EXAMPLES / example).read_text())
    body["metadata"].update(namespace=cluster.namespace, uid="0d1c2b3a-0000-4000-8000-000000000001")
    pods = [o for o in render.render(parse_job(body)) if o["kind"] == "Pod"]
    assert pods, f"{example} renders no Pod"
    path = tmp_path / "pods.yaml"
    path.write_text(yaml.safe_dump_all(pods))
    created = cluster.kubectl("create", "--dry-run=server", "-o", "name", "-f", str(path))
    assert sorted(created.stdout.split()) == sorted(f"pod/{p['metadata']['name']}" for p in pods)
    # The check can fail: the same Pod with the host's network is refused.
    loosened = {**pods[0], "spec": {**pods[0]["spec"], "hostNetwork": True}}
    path.write_text(yaml.safe_dump(loosened))
    refused = cluster.kubectl("create", "--dry-run=server", "-f", str(path), check=False)
    assert refused.returncode != 0 and "violates PodSecurity" in refused.stderr, refused.stderr


def test_a_pod_the_real_api_server_finds_invalid_fails_the_job(cluster: RealCluster) -> None:
    template = {
        "spec": {"containers": [{"name": "trainer", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}]}
    }
    cluster.create_job(job("bad", nodes=1, template=template))
    st = cluster.wait_phase("bad", "Failed", timeout=PHASE)
    assert "must be less than or equal to cpu limit of 1" in st["message"]
    assert condition(st, "PodsCreated")["reason"] == "Invalid" and cluster.pods("bad") == []


# ---- the CRD as the server applies it --------------------------------------------------------


def test_the_crd_schema_defaults_rules_and_columns_on_the_real_server(
    cluster: RealCluster, tmp_path: pathlib.Path
) -> None:
    refused = apply(cluster, tmp_path, job("zero", nodes=0), check=False)
    assert refused.returncode != 0 and "spec.nodes" in refused.stderr, refused.stderr
    digit = apply(cluster, tmp_path, job("1abc"), check=False)  # its Service name would be invalid
    assert digit.returncode != 0 and "must be a DNS-1035 label" in digit.stderr, digit.stderr
    bad_backend = job("nccl", backend="nccl")
    refused = apply(cluster, tmp_path, bad_backend, check=False)
    assert "spec.backend: nccl needs gpusPerNode > 0" in refused.stderr, refused.stderr
    generation = job("gen")
    generation["metadata"]["generation"] = "abc"
    with pytest.raises(kubernetes.client.ApiException) as raised:
        cluster.create_job(generation)
    assert raised.value.status == 400

    body = job("defaults", hold=Hold(cluster.workdir / "hold-defaults"))  # Running while the test looks
    del body["spec"]["nprocPerNode"]
    apply(cluster, tmp_path, body)
    defaults = cluster.job("defaults")
    assert defaults is not None
    stored = defaults["spec"]
    assert stored["nprocPerNode"] == "auto" and stored["backend"] == "auto" and stored["nodes"] == 2
    patched = cluster.kubectl("patch", "ddpj", "defaults", "--type=merge", "-p", '{"spec":{"nodes":3}}', check=False)
    assert patched.returncode != 0 and "spec.nodes: Invalid value: is immutable" in patched.stderr, patched.stderr
    cluster.wait_phase("defaults", "Running", timeout=PHASE)
    header = cluster.kubectl("get", "ddpj").stdout.splitlines()[0].split()
    assert header[:5] == ["NAME", "NODES", "PROCS", "PHASE", "RESTARTS"] and "AGE" in header
    wide = cluster.kubectl("get", "ddpj", "defaults", "-o", "wide").stdout.splitlines()
    assert "WORLD" in wide[0].split() and "BACKEND" in wide[0].split()
    # kubectl explain, from the server's published schema: every field says what it is.
    for path in (
        "ddpjob",
        "ddpjob.spec",
        "ddpjob.status",
        "ddpjob.spec.env",
        "ddpjob.spec.resources",
        "ddpjob.spec.checkpoint",
        "ddpjob.spec.scheduling",
        "ddpjob.status.progress",
        "ddpjob.status.lastFailure",
        "ddpjob.status.conditions",
        "ddpjob.status.lostIndices",
    ):
        explained = cluster.kubectl("explain", path).stdout
        assert "DESCRIPTION:" in explained and "<empty>" not in explained, explained
        assert "<no description>" not in explained, explained


def test_server_side_apply_owns_the_spec_and_the_operator_only_the_status(
    cluster: RealCluster, tmp_path: pathlib.Path
) -> None:
    apply(cluster, tmp_path, job("ssa", sleep=2), "--server-side", "--field-manager=team-a")
    cluster.wait_phase("ssa", "Succeeded", timeout=PHASE)
    applied = cluster.job("ssa")
    assert applied is not None
    managers = {m["manager"]: m for m in applied["metadata"]["managedFields"]}
    assert managers["team-a"]["operation"] == "Apply" and "f:spec" in json.dumps(managers["team-a"]["fieldsV1"])
    status_writers = [m for m in managers.values() if m.get("subresource") == "status"]
    assert status_writers and all("f:spec" not in json.dumps(m["fieldsV1"]) for m in status_writers)
    # Re-applying the same file changes nothing and conflicts with no one.
    again = apply(cluster, tmp_path, job("ssa", sleep=2), "--server-side", "--field-manager=team-a")
    assert "serverside-applied" in again.stdout


# ---- the job's life ---------------------------------------------------------------------------


def test_suspend_resume_deadline_ttl_and_garbage_collection(cluster: RealCluster) -> None:
    cluster.create_job(job("pause", hold=Hold(cluster.workdir / "hold-pause")))
    cluster.wait_phase("pause", "Running", timeout=PHASE, readyNodes=2)
    cluster.custom.patch_namespaced_custom_object(
        "ddpjob.io", "v1alpha1", cluster.namespace, "ddpjobs", "pause", {"spec": {"suspend": True}}
    )
    cluster.wait_phase("pause", "Suspended", timeout=PHASE)
    wait_until(lambda: cluster.pods("pause") == [], PHASE, "the suspended job's Pods were not deleted")
    cluster.custom.patch_namespaced_custom_object(
        "ddpjob.io", "v1alpha1", cluster.namespace, "ddpjobs", "pause", {"spec": {"suspend": False}}
    )
    cluster.wait_phase("pause", "Running", timeout=PHASE, readyNodes=2)

    # Deleting the job: the real garbage collector removes its Pods and Service.
    cluster.custom.delete_namespaced_custom_object("ddpjob.io", "v1alpha1", cluster.namespace, "ddpjobs", "pause")
    wait_until(
        lambda: (
            cluster.pods("pause") == []
            and not cluster.core.list_namespaced_service(cluster.namespace, field_selector="metadata.name=pause").items
        ),
        PHASE,
        "Pods or Service outlived their job",
        lambda: cluster.pods("pause"),
    )

    cluster.create_job(job("late", nodes=1, hold=Hold(cluster.workdir / "hold-late"), activeDeadlineSeconds=3))
    st = cluster.wait_phase("late", "Failed", timeout=PHASE)
    assert condition(st, "Failed").get("reason") == "DeadlineExceeded" or "DeadlineExceeded" in json.dumps(st)

    cluster.create_job(job("brief", nodes=1, ttlSecondsAfterFinished=1))
    wait_until(
        lambda: cluster.job("brief") is None,
        PHASE,
        "the finished job was not deleted after its TTL",
        lambda: cluster.status("brief"),
    )


def test_a_cluster_wide_install_runs_jobs_in_any_namespace(
    request: pytest.FixtureRequest, tmp_path: pathlib.Path
) -> None:
    from tests.support.control_plane import real_cluster

    with real_cluster(request, tmp_path / "cluster", scope="cluster") as wide:
        wide.create_job(job("anywhere", nodes=1))
        assert wide.wait_phase("anywhere", "Succeeded", timeout=PHASE)["restarts"] == 0


def test_the_charts_rbac_grants_the_operator_what_it_uses_and_nothing_more(cluster: RealCluster) -> None:
    sa = f"system:serviceaccount:{cluster.namespace}:ddpjob-ddpjob-operator"

    def can(verb: str, resource: str) -> bool:
        kind, _, sub = resource.partition("/")  # `can-i create pods/x` would mean the Pod named x
        subresource = [f"--subresource={sub}"] if sub else []
        done = cluster.kubectl(
            "auth", "can-i", verb, kind, *subresource, f"--as={sa}", "-n", cluster.namespace, check=False
        )
        return done.stdout.strip() == "yes"

    for verb, resource in (
        ("create", "pods"),
        ("delete", "pods"),
        ("watch", "pods"),
        ("create", "services"),
        ("patch", "ddpjobs.ddpjob.io/status"),
        ("create", "events"),
    ):
        assert can(verb, resource), f"the chart's Role lacks {verb} {resource}"
    for verb, resource in (
        ("get", "secrets"),
        ("create", "pods/exec"),
        ("update", "pods"),
        ("delete", "services"),
        ("create", "ddpjobs.ddpjob.io"),
        ("patch", "nodes"),
    ):
        assert not can(verb, resource), f"the chart's Role grants {verb} {resource}"


FAIL_TWICE = (
    "import os, sys; attempt = int(os.environ['DDPJOB_RESTART_COUNT']); "
    "sys.exit(137 if attempt < 2 and os.environ['NODE_RANK'] == '1' else 0)"
)


def test_two_operator_replicas_racing_count_each_gang_failure_once(cluster: RealCluster) -> None:
    """A leader hand-over where both run for a while: status writes carry the
    resourceVersion they were planned from, so on a real server neither overwrites the
    other and the job's history never goes backwards."""
    import copy
    import threading

    from ddpjob_devcluster.clusters.client import OperatorProcess

    op = cluster.operator
    assert op is not None and op.command is not None and op.env is not None  # the chart's, started
    second = OperatorProcess(
        op.kubeconfig,
        cluster.workdir / "operator-2.log",
        command=list(op.command),
        env=dict(op.env),
    ).start()
    seen: list[tuple[str | None, int]] = []
    done = threading.Event()

    def record() -> None:
        while not done.is_set():
            status = cluster.status("pair")
            seen.append((status.get("phase"), status.get("restarts", 0)))
            done.wait(0.05)

    watcher = threading.Thread(target=record, daemon=True)
    try:
        body = job("pair", nodes=3, maxRestarts=5)
        body["spec"]["command"] = [sys.executable, "-c", FAIL_TWICE]
        watcher.start()
        cluster.create_job(copy.deepcopy(body))
        final = cluster.wait_phase("pair", "Succeeded", timeout=PHASE)
    finally:
        done.set()
        second.stop()
    watcher.join(timeout=5)
    seen.append((final["phase"], final["restarts"]))  # the poller may stop just before it
    assert final["restarts"] == 2 and final["lastFailure"]["nodeRank"] == 1
    restarts = [r for _, r in seen]
    assert restarts == sorted(restarts), restarts  # never overwritten by a stale plan
    phases = [p for p, _ in seen if p]
    first = phases.index("Succeeded")
    assert set(phases[first:]) == {"Succeeded"}, phases
    pods = cluster.pods("pair")
    assert sorted(p["metadata"]["name"] for p in pods) == ["pair-0", "pair-1", "pair-2"]
    assert {p["metadata"]["labels"]["ddpjob.io/restart-count"] for p in pods} == {"2"}


def test_the_operator_refuses_a_checkpoint_hostpath_job_and_creates_nothing(cluster: RealCluster) -> None:
    body = job(
        "host",
        nodes=1,
        checkpoint={"volume": {"hostPath": {"path": "/", "type": "Directory"}}, "mountPath": "/host"},
        template={"spec": {"nodeName": "anywhere", "tolerations": [{"operator": "Exists"}]}},
    )
    cluster.create_job(body)
    st = cluster.wait_phase("host", "Failed", timeout=PHASE)
    assert "spec.checkpoint.volume.hostPath" in st["message"] and "spec.template.spec.nodeName" in st["message"]
    assert cluster.pods("host") == []


def test_a_user_with_the_default_edit_role_may_run_jobs_and_a_viewer_only_read_them(cluster: RealCluster) -> None:
    # The chart's aggregated ClusterRoles, folded into edit/view by the real controller manager.
    rbac = kubernetes.client.RbacAuthorizationV1Api(cluster.api)
    for user, role in (("alice", "edit"), ("bob", "view")):
        rbac.create_namespaced_role_binding(
            cluster.namespace,
            {  # type: ignore[arg-type]  # a dict body: the client sends it as it is
                "metadata": {"name": f"{user}-{role}"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
            },
        )

    def can(user: str, verb: str) -> bool:
        done = cluster.kubectl(
            "auth", "can-i", verb, "ddpjobs.ddpjob.io", f"--as={user}", "-n", cluster.namespace, check=False
        )
        return done.stdout.strip() == "yes"

    wait_until(lambda: can("alice", "create"), REACTION, "edit did not come to include DDPJobs")
    assert can("alice", "delete") and can("bob", "list") and not can("bob", "create")
