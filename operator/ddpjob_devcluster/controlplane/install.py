"""The operator installed as a user installs it: from the Helm chart's rendered
manifests (`helm template`), applied with kubectl, and run with the chart's
ServiceAccount token, so every API call it makes is authorized by the chart's RBAC and
nothing else.

The one difference from a cluster: the Deployment's container is not run by a kubelet
(the process kubelet runs training containers only) but as a local process with the
container's command, args and environment, and a kubeconfig carrying a token that the
TokenRequest API issued for the chart's ServiceAccount, as the kubelet would project it.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import shutil
import subprocess
from typing import Any

import kubernetes
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "ddpjob-operator"
RELEASE = "ddpjob"
TOKEN_SECONDS = 24 * 3600  # outlives any test run; a real kubelet would rotate it


class InstallError(RuntimeError):
    pass


def helm() -> str:
    found = shutil.which("helm") or shutil.which("helm", path=str(ROOT / ".tools" / "bin"))
    if found is None:
        raise InstallError("helm is not installed: `make tools` puts it in .tools/bin")
    return found


def render(namespace: str, values: dict[str, Any]) -> list[dict[str, Any]]:
    """`helm template` of the chart into `namespace` with `values`."""
    command = [helm(), "template", RELEASE, str(CHART), "--namespace", namespace, "--values", "-"]
    done = subprocess.run(command, input=yaml.safe_dump(values), capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise InstallError(f"helm template failed: {done.stderr.strip()}")
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@dataclasses.dataclass
class OperatorDeployment:
    """What the chart's Deployment would run."""

    namespace: str
    service_account: str
    command: list[str]
    env: dict[str, str]


def deployment(docs: list[dict[str, Any]]) -> OperatorDeployment:
    found = [d for d in docs if d.get("kind") == "Deployment"]
    if len(found) != 1:
        raise InstallError(f"the chart rendered {len(found)} Deployments, expected 1")
    pod = found[0]["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "operator")
    # The downward API's fields, as the kubelet would fill them for this process's Pod.
    name, namespace = found[0]["metadata"]["name"], found[0]["metadata"]["namespace"]
    downward = {"metadata.name": f"{name}-process", "metadata.namespace": namespace}
    env = {}
    for e in container.get("env") or []:
        field = ((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        if "value" in e:
            env[e["name"]] = str(e["value"])
        elif field in downward:
            env[e["name"]] = downward[field]
    # The probe and metrics ports are the Pod's own in a cluster; here they would collide
    # between operators on one machine, and nothing scrapes them.
    args = [a for a in container.get("args") or [] if not a.startswith(("--liveness", "--metrics-port"))]
    return OperatorDeployment(namespace, pod["serviceAccountName"], [*container["command"], *args], env)


def apply(kubeconfig: pathlib.Path, docs: list[dict[str, Any]], *, kubectl: str) -> None:
    """Everything but the Deployment and its Services, applied server-side as the chart's
    field manager would; the CRD first, and its being Established awaited."""
    wanted = [d for d in docs if d.get("kind") not in ("Deployment", "Service")]
    command = [
        kubectl,
        f"--kubeconfig={kubeconfig}",
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=helm",
        "-f",
        "-",
    ]
    done = subprocess.run(command, input=yaml.safe_dump_all(wanted), capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise InstallError(f"kubectl apply of the chart failed: {done.stderr.strip()}")
    for crd in (d for d in wanted if d.get("kind") == "CustomResourceDefinition"):
        subprocess.run(
            [
                kubectl,
                f"--kubeconfig={kubeconfig}",
                "wait",
                "--for=condition=Established",
                "--timeout=30s",
                f"crd/{crd['metadata']['name']}",
            ],
            capture_output=True,
            text=True,
            timeout=40,
            check=True,
        )


def admin_apply(plane: Any) -> Any:
    """`apply(objects)` as the plane's admin, with kubectl: how a gang scheduler's or queue's
    CRDs and RBAC are installed (their `start(plane, apply)`)."""
    from ddpjob_devcluster.clusters.client import ClusterClient  # the cluster API imports this module

    kubectl = ClusterClient.kubectl_path()
    return lambda objects: apply(plane.admin_kubeconfig, objects, kubectl=kubectl)


def service_account_token(api: kubernetes.client.ApiClient, name: str, namespace: str) -> str:
    """A bound token for the ServiceAccount from the TokenRequest API."""
    request = kubernetes.client.AuthenticationV1TokenRequest(
        spec=kubernetes.client.V1TokenRequestSpec(expiration_seconds=TOKEN_SECONDS)
    )
    answer = kubernetes.client.CoreV1Api(api).create_namespaced_service_account_token(name, namespace, request)
    token = answer.status.token if answer.status is not None else None
    if not token:
        raise RuntimeError(f"the TokenRequest for ServiceAccount {namespace}/{name} was answered without a token")
    return token


def operator_env(deploy: OperatorDeployment, kubeconfig: pathlib.Path) -> dict[str, str]:
    env = dict(os.environ, **deploy.env, KUBECONFIG=str(kubeconfig), PYTHONUNBUFFERED="1")
    env["HOME"] = os.environ.get("HOME", "/tmp")  # the chart points HOME at an emptyDir
    return env
