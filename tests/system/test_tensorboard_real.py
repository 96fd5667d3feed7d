"""spec.tensorboard on the real control plane, with the chart's RBAC and values: the
operator makes the job's TensorBoard NetworkPolicy, Deployment and Service; kube-controller-manager makes
its ReplicaSet and Pod, which the API server's Pod Security admission lets into a
namespace that enforces `restricted`; the Service selects that Pod and no training Pod;
the process kubelet runs it (docs/divergences.md, K9) and TensorBoard answers at the Pod's
IP; the status says where it answers; and the garbage collector removes all of it with
the job.

`ddpjob tensorboard` is checked here up to kubectl's refusal to forward (the process
kubelet serves no port-forward), past it with a kubectl stand-in in
tests/cli/test_tensorboard_command.py, and through the API server's service proxy on the
demo cluster (tests/devcluster/demo/test_demo_tensorboard.py): here the Pods' addresses
are loopback ones, which no EndpointSlice may hold, so the proxy has no endpoint.
"""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from typing import Any

import kubernetes
import pytest

from ddpjob_devcluster.clusters.client import ROOT, wait_until
from tests.support.deadlines import CLUSTER_TEST, PHASE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(CLUSTER_TEST)]

BOARD = "board-tensorboard"


def owners(obj: Any) -> list[tuple[str, str]]:
    """The controllers among the owners of a client model (a Deployment, Service, Pod...)."""
    return [(r.kind, r.uid) for r in (obj.metadata.owner_references or []) if r.controller]


def test_the_operator_runs_a_tensorboard_the_job_owns(cluster) -> None:
    core, apps = cluster.core, kubernetes.client.AppsV1Api(cluster.client)
    ns = cluster.namespace
    core.patch_namespace(ns, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}})
    cluster.kubectl("apply", "-f", str(ROOT / "manifests" / "examples" / "ckpt-claim.yaml"))
    job = cluster.create_job(
        {
            "apiVersion": "ddpjob.io/v1alpha1",
            "kind": "DDPJob",
            "metadata": {"name": "board"},
            "spec": {
                "image": "ddpjob/trainer:0.2.0-cpu",
                "command": ["sleep", "3600"],
                "tensorboard": True,
                "checkpoint": {"claimName": "ckpt"},
            },
        }
    )
    uid = job["metadata"]["uid"]

    board = wait_until(
        lambda: cluster.status("board").get("tensorboard"),
        PHASE,
        "no status.tensorboard",
        lambda: cluster.status("board"),
    )
    assert board == {"url": f"http://{BOARD}.{ns}.svc:6006/", "service": BOARD}
    deployment = apps.read_namespaced_deployment(BOARD, ns)
    service = core.read_namespaced_service(BOARD, ns)
    policy = kubernetes.client.NetworkingV1Api(cluster.client).read_namespaced_network_policy(BOARD, ns)
    assert owners(deployment) == owners(service) == owners(policy) == [("DDPJob", uid)]
    assert deployment.metadata is not None and policy.spec is not None
    # No ingress over the Pod network (port-forward goes through the kubelet).
    assert policy.spec.policy_types == ["Ingress"] and not policy.spec.ingress

    # kube-controller-manager's Deployment and ReplicaSet controllers make its Pod, and
    # Pod Security admission (enforce: restricted) lets it in.
    def tensorboard_pod():
        pods = core.list_namespaced_pod(ns, label_selector="ddpjob.io/tensorboard-for=board").items
        return pods[0] if pods else None

    pod = wait_until(
        tensorboard_pod,
        PHASE,
        "no TensorBoard Pod was made",
        lambda: cluster.kubectl("describe", "deployment,replicaset", check=False).stdout,
    )
    (replica_set_owner,) = owners(pod)
    assert replica_set_owner[0] == "ReplicaSet"
    assert owners(apps.read_namespaced_replica_set(pod.metadata.owner_references[0].name, ns)) == [
        ("Deployment", deployment.metadata.uid)
    ]
    claim = next(v for v in pod.spec.volumes if v.name == "checkpoint").persistent_volume_claim
    assert (claim.claim_name, claim.read_only) == ("ckpt", True)
    assert pod.spec.containers[0].security_context.run_as_non_root is True
    assert service.spec.selector.items() <= pod.metadata.labels.items()
    selector = policy.spec.pod_selector
    assert selector is not None and selector.match_labels is not None
    assert selector.match_labels.items() <= pod.metadata.labels.items()
    assert "ddpjob.io/job-name" not in pod.metadata.labels  # not one of the gang's Pods

    # The training Pod runs beside it, and the process kubelet runs TensorBoard's: it
    # answers at the Pod's IP with its page.
    cluster.wait_phase("board", "Running", readyNodes=1)
    running = wait_until(
        lambda: (p := tensorboard_pod()) and p.status.phase == "Running" and p,
        PHASE,
        "the TensorBoard Pod did not run",
        lambda: cluster.kubectl("describe", "pod", check=False).stdout,
    )
    assert running.spec.node_name in {shape.name for shape in cluster.shapes}

    def page() -> bytes | None:
        try:
            with urllib.request.urlopen(f"http://{running.status.pod_ip}:6006/", timeout=10) as response:
                return response.read()
        except OSError:
            return None

    assert b"<tb-webapp>" in wait_until(
        page,
        PHASE,
        "TensorBoard did not answer at its Pod's IP",
        lambda: cluster.kubectl("logs", running.metadata.name, check=False).stdout,
    )

    # `ddpjob tensorboard --via port-forward` through the real kubectl, with the cluster's
    # kubeconfig: the API server cannot open the forward to the process kubelet, and the
    # command says so in one line.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ddpjob.cli",
            "tensorboard",
            "board",
            "--kubeconfig",
            str(cluster.kubeconfig),
            "-n",
            ns,
            "--via",
            "port-forward",
        ],
        capture_output=True,
        text=True,
        timeout=PHASE,
    )
    assert done.returncode == 1 and done.stdout == "", done
    assert done.stderr.startswith("error: kubectl port-forward ended: ") and "error upgrading connection" in done.stderr
    assert len(done.stderr.splitlines()) == 1, done

    # With the job, everything goes: Deployment, ReplicaSet, Pod, Service and NetworkPolicy.
    cluster.custom.delete_namespaced_custom_object("ddpjob.io", "v1alpha1", ns, "ddpjobs", "board")

    def gone() -> bool:
        left = (
            apps.list_namespaced_deployment(ns).items
            + apps.list_namespaced_replica_set(ns).items
            + core.list_namespaced_pod(ns, label_selector="ddpjob.io/tensorboard-for=board").items
        )
        policies = kubernetes.client.NetworkingV1Api(cluster.client).list_namespaced_network_policy(ns).items
        return not left and not [
            o for o in core.list_namespaced_service(ns).items + policies if o.metadata.name == BOARD
        ]

    wait_until(
        gone, PHASE, "the TensorBoard outlived its job", lambda: cluster.kubectl("get", "all", check=False).stdout
    )
