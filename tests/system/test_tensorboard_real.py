"""spec.tensorboard on the real control plane, with the chart's RBAC and values: the
operator makes the job's TensorBoard Deployment and Service; kube-controller-manager makes
its ReplicaSet and Pod, which the API server's Pod Security admission lets into a
namespace that enforces `restricted`; the Service selects that Pod and no training Pod;
the status says where it answers; and the garbage collector removes all of it with the job.

The process kubelet runs only a Pod's `trainer` container, so the TensorBoard Pod is kept
off the Nodes (a taint the training Pods tolerate) and waits, Pending, for a Node that can
run it (docs/divergences.md). TensorBoard itself serving the trainer's event files is
C1's browser test; `ddpjob tensorboard` is checked here up to kubectl's refusal to forward
to a Pod that does not run, and past it with a kubectl stand-in in
tests/cli/test_tensorboard_command.py.
"""
from __future__ import annotations

import subprocess
import sys

import kubernetes
import pytest

from ddpjob_devcluster.clusters.client import ROOT, wait_until
from tests.support.deadlines import CLUSTER_TEST, PHASE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(CLUSTER_TEST)]

TAINT = {"key": "ddpjob.io/test-no-tensorboard", "value": "true", "effect": "NoSchedule"}
BOARD = "board-tensorboard"


def owners(obj: object) -> list[tuple[str, str]]:
    return [(r.kind, r.uid) for r in (obj.metadata.owner_references or []) if r.controller]


def test_the_operator_runs_a_tensorboard_the_job_owns(cluster) -> None:
    core, apps = cluster.core, kubernetes.client.AppsV1Api(cluster.client)
    ns = cluster.namespace
    core.patch_namespace(ns, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}})
    for shape in cluster.shapes:
        core.patch_node(shape.name, {"spec": {"taints": [TAINT]}})
    cluster.kubectl('apply', '-f', str(ROOT / 'manifests' / 'examples' / 'ckpt-claim.yaml'))
    job = cluster.create_job({
        "apiVersion": "ddpjob.io/v1alpha1", "kind": "DDPJob", "metadata": {"name": "board"},
        "spec": {"image": "ddpjob/trainer:0.2.0-cpu", "command": ["sleep", "3600"], "tensorboard": True,
                 "checkpoint": {"claimName": "ckpt"},
                 "template": {"spec": {"tolerations": [{**TAINT, "operator": "Equal"}]}}},
    })
    uid = job["metadata"]["uid"]

    board = wait_until(lambda: cluster.status("board").get("tensorboard"), PHASE, "no status.tensorboard",
                       lambda: cluster.status("board"))
    assert board == {"url": f"http://{BOARD}.{ns}.svc:6006/", "service": BOARD}
    deployment = apps.read_namespaced_deployment(BOARD, ns)
    service = core.read_namespaced_service(BOARD, ns)
    assert owners(deployment) == owners(service) == [("DDPJob", uid)]

    # kube-controller-manager's Deployment and ReplicaSet controllers make its Pod, and
    # Pod Security admission (enforce: restricted) lets it in.
    def tensorboard_pod():
        pods = core.list_namespaced_pod(ns, label_selector="ddpjob.io/tensorboard-for=board").items
        return pods[0] if pods else None
    pod = wait_until(tensorboard_pod, PHASE, "no TensorBoard Pod was made",
                     lambda: cluster.kubectl('describe', 'deployment,replicaset', check=False).stdout)
    (replica_set_owner,) = owners(pod)
    assert replica_set_owner[0] == "ReplicaSet"
    assert owners(apps.read_namespaced_replica_set(pod.metadata.owner_references[0].name, ns)) == [
        ("Deployment", deployment.metadata.uid)]
    claim = next(v for v in pod.spec.volumes if v.name == "checkpoint").persistent_volume_claim
    assert (claim.claim_name, claim.read_only) == ("ckpt", True)
    assert pod.spec.containers[0].security_context.run_as_non_root is True
    assert service.spec.selector.items() <= pod.metadata.labels.items()
    assert "ddpjob.io/job-name" not in pod.metadata.labels  # not one of the gang's Pods

    # The training Pod runs beside it, on a Node the TensorBoard's Pod is kept off.
    cluster.wait_phase("board", "Running", readyNodes=1)
    pending = wait_until(lambda: (p := tensorboard_pod()) and p.status.conditions and p, PHASE,
                         "the TensorBoard Pod was never considered by the scheduler")
    assert pending.status.phase == "Pending" and pending.spec.node_name is None

    # `ddpjob tensorboard` through the real kubectl, with the cluster's kubeconfig: kubectl
    # finds the Service's Pod and refuses to forward to a Pod that is not running, and the
    # command says so in one line.
    done = subprocess.run([sys.executable, "-m", "ddpjob.cli", "tensorboard", "board", "--kubeconfig",
                           str(cluster.kubeconfig), "-n", ns], capture_output=True, text=True, timeout=PHASE)
    assert done.returncode == 1 and done.stdout == "", done
    assert done.stderr.startswith("error: kubectl port-forward ended: ") and "pod is not running" in done.stderr, done

    # With the job, everything goes: Deployment, ReplicaSet, Pod and Service.
    cluster.custom.delete_namespaced_custom_object("ddpjob.io", "v1alpha1", ns, "ddpjobs", "board")

    def gone() -> bool:
        left = (apps.list_namespaced_deployment(ns).items + apps.list_namespaced_replica_set(ns).items
                + core.list_namespaced_pod(ns, label_selector="ddpjob.io/tensorboard-for=board").items)
        return not left and not [s for s in core.list_namespaced_service(ns).items if s.metadata.name == BOARD]
    wait_until(gone, PHASE, "the TensorBoard outlived its job",
               lambda: cluster.kubectl('get', 'all', check=False).stdout)
