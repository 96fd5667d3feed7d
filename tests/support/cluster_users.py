"""Users of a real control plane's namespace, as docs/threat-model.md names them, and the
jobs they write: the trust-boundary tests' personas (tests/system/*_real.py).

- "job-only": may create and patch DDPJobs and read Pods, logs and Events; no Secrets,
  no Pods or Services of their own;
- "pod-maker": the same, and may create Pods and Services (what a job makes in their
  name), still no Secrets;
- the default `edit` ClusterRole (DDPJobs aggregated into it by the chart).
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import time
from typing import Any, Protocol

import kubernetes
import yaml

from ddpjob_devcluster.clusters.client import wait_until
from ddpjob_devcluster.clusters.real import RealCluster
from ddpjob_devcluster.controlplane.controlplane import ControlPlane
from tests.support.deadlines import REACTION

JOB_ONLY = {
    "rules": [
        {"apiGroups": ["ddpjob.io"], "resources": ["ddpjobs"], "verbs": ["create", "patch", "get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods", "pods/log", "events"], "verbs": ["get", "list", "watch"]},
    ]
}
POD_MAKER = {"rules": [*JOB_ONLY["rules"], {"apiGroups": [""], "resources": ["pods", "services"], "verbs": ["create"]}]}


def job(name: str, nodes: int = 1, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {"name": name},
        "spec": {
            "nodes": nodes,
            "nprocPerNode": 1,
            "image": "ddpjob/trainer:test",
            "command": [sys.executable, "-c", "print('done')"],
            "restartBackoffSeconds": 0,
            **spec,
        },
    }


class InNamespace(Protocol):
    """A namespace on a real control plane, as its admin: a `RealCluster`, or the cluster
    commands' tests' `Namespace` (tests/cli/conftest.py)."""

    @property
    def api(self) -> kubernetes.client.ApiClient | None: ...
    @property
    def namespace(self) -> str: ...
    @property
    def plane(self) -> ControlPlane: ...


def bind(cluster: InNamespace, user: str, role: dict[str, Any] | str) -> pathlib.Path:
    """A user of the cluster's CA bound in the job namespace to `role` (a ClusterRole's name,
    or the rules of a Role of its own); their kubeconfig."""
    rbac = kubernetes.client.RbacAuthorizationV1Api(cluster.api)
    if isinstance(role, str):
        ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}
    else:
        rbac.create_namespaced_role(cluster.namespace, {"metadata": {"name": user}, "rules": role["rules"]})  # type: ignore[arg-type]  # a dict body: the client sends it as it is
        ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": user}
    rbac.create_namespaced_role_binding(
        cluster.namespace,
        {  # type: ignore[arg-type]  # a dict body: the client sends it as it is
            "metadata": {"name": user},
            "roleRef": ref,
            "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
        },
    )
    return cluster.plane.client_kubeconfig(f"{cluster.namespace}-{user}", user, namespace=cluster.namespace)


def wait_for_edit_to_include_ddpjobs(cluster: RealCluster, kubeconfig: pathlib.Path) -> None:
    wait_until(
        lambda: (
            cluster.kubectl(
                f"--kubeconfig={kubeconfig}", "auth", "can-i", "create", "ddpjobs.ddpjob.io", check=False
            ).stdout.strip()
            == "yes"
        ),
        REACTION,
        "edit did not come to include DDPJobs",
    )


def as_user(
    cluster: RealCluster, kubeconfig: pathlib.Path, tmp_path: pathlib.Path, verb: str, body: Any, *args: str
) -> subprocess.CompletedProcess:
    path = tmp_path / f"{verb}-{time.monotonic_ns()}.yaml"
    path.write_text(yaml.safe_dump(body))
    return cluster.kubectl(
        f"--kubeconfig={kubeconfig}", verb, "-n", cluster.namespace, "-f", str(path), *args, check=False
    )


def patch_as(cluster: RealCluster, kubeconfig: pathlib.Path, name: str, patch: str) -> subprocess.CompletedProcess:
    """A merge patch of DDPJob `name` by that user."""
    return cluster.kubectl(
        f"--kubeconfig={kubeconfig}",
        "patch",
        "ddpj",
        name,
        "-n",
        cluster.namespace,
        "--type=merge",
        "-p",
        patch,
        check=False,
    )
