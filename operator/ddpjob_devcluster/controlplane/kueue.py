"""Kueue's manager beside a `ControlPlane`, installed as its own manifests install it.

What `config/default` of the pinned module (v0.17.0, `build.KUEUE`) installs, read from
the module in the Go module cache: the `kueue.x-k8s.io` CRDs (`config/components/crd`,
with its conversion-webhook patches), the manager's ClusterRole
(`config/components/rbac/role.yaml`), and its mutating and validating webhooks
(`config/components/webhook`, with that kustomization's namespaceSelector patches), and
a Configuration with the `pod` integration, so plain Pods carrying
`kueue.x-k8s.io/queue-name` are grouped, gated, admitted against a ClusterQueue's quota
and preempted by Kueue itself.

Two differences from a cluster, both about reaching it: there is no kube-proxy on
loopback, so every webhook's `clientConfig.service` becomes a `url` on 127.0.0.1 with
the dev cluster's CA as caBundle, and the serving certificate comes from `pki.py`
(`internalCertManagement` off: upstream's cert-controller would write a Secret and patch
caBundles for a Service that cannot be reached here). The visibility API server (an
aggregated API that would need a Service too) is off; nothing here reads it.

With internalCertManagement off, Kueue v0.17.0 loads a metrics serving certificate from
the fixed path `/etc/kueue/metrics/certs/tls.{crt,key}` (its Configuration API docs; a
cert-manager install mounts it there) and exits without one, even with the metrics
server off. The dev cluster writes one there once, when it is missing (that takes root);
it is never served.
"""

from __future__ import annotations

import base64
import copy
import fcntl
import json
import os
import pathlib
import shutil
import urllib.request
from typing import Any

import yaml

from ddpjob.local.ports import free_port
from ddpjob_devcluster.controlplane import build, pki
from ddpjob_devcluster.controlplane.process import Component, StartFailure

USER = "system:kueue-manager"
# Kueue's own namespace (its Configuration's default); the webhook manifests' patches
# keep it and kube-system out of the Pod webhooks.
NAMESPACE = "kueue-system"
# A cold manager on 2 busy cores syncs its caches and starts the webhook server in
# seconds; a minute is a fault.
READY_SECONDS = 90
# kustomize's names: namePrefix `kueue-` of config/default.
NAME_PREFIX = "kueue-"
# What config/components/rbac grants the manager's ServiceAccount (leader election aside: off).
MANAGER_ROLES = ("role.yaml", "manager_secrets_role.yaml", "manager_clusterprofiles_role.yaml")
METRICS_CERTS = pathlib.Path("/etc/kueue/metrics/certs")  # cmd/kueue/main.go's metricsCertPath


def _load_all(path: pathlib.Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _kustomize_patches(kustomization: pathlib.Path) -> list[Any]:
    """The kustomization's active `patches` (file paths or inline YAML), comments skipped."""
    return list((yaml.safe_load(kustomization.read_text()) or {}).get("patches") or [])


def _client_config(url_base: str, ca_bundle: str, service: dict[str, Any]) -> dict[str, Any]:
    """A Service reference as a URL on loopback (no kube-proxy here), same path."""
    return {"url": url_base + service.get("path", "/"), "caBundle": ca_bundle}


def crds(url_base: str, ca_bundle: str) -> list[dict[str, Any]]:
    """The module's CRDs with its conversion-webhook patches (config/components/crd)."""
    folder = build.module_dir(build.KUEUE) / "config" / "components" / "crd"
    by_name = {
        doc["metadata"]["name"]: doc for path in sorted((folder / "bases").glob("*.yaml")) for doc in _load_all(path)
    }
    for patch in _kustomize_patches(folder / "kustomization.yaml"):
        body = yaml.safe_load((folder / patch["path"]).read_text())
        conversion = copy.deepcopy(body["spec"]["conversion"])
        webhook = conversion["webhook"]
        webhook["clientConfig"] = _client_config(url_base, ca_bundle, webhook["clientConfig"]["service"])
        by_name[body["metadata"]["name"]]["spec"]["conversion"] = conversion
    return list(by_name.values())


def webhooks(url_base: str, ca_bundle: str) -> list[dict[str, Any]]:
    """The module's webhook configurations with its kustomization's patches applied."""
    folder = build.module_dir(build.KUEUE) / "config" / "components" / "webhook"
    configs = [doc for doc in _load_all(folder / "manifests.yaml") if doc["kind"].endswith("WebhookConfiguration")]
    patches = [yaml.safe_load(p["patch"]) for p in _kustomize_patches(folder / "kustomization.yaml") if "patch" in p]
    for config in configs:
        for patch in patches:
            if (patch["kind"], patch["metadata"]["name"]) != (config["kind"], config["metadata"]["name"]):
                continue
            changes = {w["name"]: w for w in patch.get("webhooks") or []}
            for hook in config["webhooks"]:
                hook.update({k: v for k, v in changes.get(hook["name"], {}).items() if k != "name"})
        for hook in config["webhooks"]:
            hook["clientConfig"] = _client_config(url_base, ca_bundle, hook["clientConfig"]["service"])
        config["metadata"] = {"name": NAME_PREFIX + config["metadata"]["name"]}
    return configs


def rbac() -> list[dict[str, Any]]:
    """The manager's roles from the module (its ClusterRole; the Roles in its namespace for
    Secrets and ClusterProfiles, which its caches watch), each bound to the manager's
    client identity as config/components/rbac binds them to its ServiceAccount."""
    folder = build.module_dir(build.KUEUE) / "config" / "components" / "rbac"
    objects: list[dict[str, Any]] = []
    for name in MANAGER_ROLES:
        for role in _load_all(folder / name):
            meta = {"name": NAME_PREFIX + role["metadata"]["name"]}
            if role["kind"] == "Role":
                meta["namespace"] = NAMESPACE
            role["metadata"] = meta
            binding = {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": role["kind"] + "Binding",
                "metadata": {**meta, "name": meta["name"] + "binding"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role["kind"], "name": meta["name"]},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}],
            }
            objects += [role, binding]
    return objects


def configuration(probe: int, webhook_port: int, cert_dir: pathlib.Path) -> dict[str, Any]:
    """config/components/manager's Configuration, for one process on loopback: the `pod`
    integration (plain Pods with a queue-name label in any namespace but Kueue's own and
    kube-system, the default managedJobsNamespaceSelector), no leader election, no
    metrics server, the webhook's certificate from `cert_dir`."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{probe}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "clientConnection": {"qps": 50, "burst": 100},
        "integrations": {"frameworks": ["pod"]},
    }


def _serving_cert(plane: Any, cert_dir: pathlib.Path) -> str:
    """The webhook's certificate for 127.0.0.1 from the cluster's CA, where
    controller-runtime's webhook server reads it (tls.crt, tls.key); the caBundle."""
    pair = plane.authority.issue(
        "kueue-webhook", "kueue-webhook-service", server=True, hosts=("127.0.0.1", "localhost")
    )
    cert_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(pair.cert, cert_dir / "tls.crt")
    shutil.copyfile(pair.key, cert_dir / "tls.key")
    (cert_dir / "tls.key").chmod(0o600)
    return base64.b64encode(plane.ca.read_bytes()).decode()


def _metrics_cert(folder: pathlib.Path = METRICS_CERTS) -> None:
    """A key pair where Kueue insists on finding one (see the module's docstring); made
    once under a lock (workers in parallel), the key written before the certificate that
    marks the pair complete. Its content does not matter: the metrics server is off."""
    if (folder / "tls.crt").is_file():
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if (folder / "tls.crt").is_file():
                return
            pair = pki.Authority(folder / "ca").issue("metrics", "kueue-metrics", server=True, hosts=("127.0.0.1",))
            os.replace(pair.key, folder / "tls.key")
            os.replace(pair.cert, folder / "tls.crt")
    except OSError as exc:
        raise StartFailure(
            f"kueue: Kueue v0.17.0 with internalCertManagement off reads a metrics certificate from "
            f"{folder} and exits without one; cannot write it there: {exc}"
        ) from None


def start(plane: Any, apply: Any) -> Component:
    """Build (cached), install the CRDs, RBAC and webhooks (`apply(objects)`, as the
    cluster's admin) and start the manager as `plane`'s component; returns it, ready."""
    folder = build.build(build.KUEUE)
    _metrics_cert()
    probe, webhook_port = free_port(), free_port()
    cert_dir = plane.workdir / "kueue-certs"
    ca_bundle = _serving_cert(plane, cert_dir)
    url_base = f"https://127.0.0.1:{webhook_port}"
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    apply([namespace, *crds(url_base, ca_bundle), *rbac()])
    kubeconfig = plane.client_kubeconfig("kueue", USER)
    config = plane.workdir / "kueue-config.yaml"
    config.write_text(json.dumps(configuration(probe, webhook_port, cert_dir)))
    manager = Component(
        "kueue",
        [
            str(folder / "kueue"),
            f"--config={config}",
            f"--kubeconfig={kubeconfig}",
            # The visibility server is an aggregated API behind a Service: not reachable here.
            "--feature-gates=VisibilityOnDemand=false",
            "--zap-log-level=2",
        ],
        plane.logs / "kueue.log",
        ports=(probe, webhook_port),
    )
    plane.components.append(manager)
    # /readyz turns ok once the webhook server is serving (its certificates loaded):
    # only then are the webhooks registered, as their failurePolicy is Fail.
    manager.wait_ready(lambda: _get(f"http://127.0.0.1:{probe}/readyz") == "ok", READY_SECONDS, "ready (/readyz)")
    apply(webhooks(url_base, ca_bundle))
    return manager


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode().strip()


# ---- the queue objects a cluster admin makes (per test) ----------------------------------


def queue_objects(
    name: str, namespace: str, quota: dict[str, str], *, within_cluster_queue: str = "LowerPriority"
) -> list[dict[str, Any]]:
    """A ResourceFlavor, a ClusterQueue `name` with `quota` (resource -> nominalQuota) in
    that flavor and preemption within itself, and a LocalQueue `name` in `namespace`."""
    api = "kueue.x-k8s.io/v1beta2"
    flavor = {"apiVersion": api, "kind": "ResourceFlavor", "metadata": {"name": name}}
    cluster_queue = {
        "apiVersion": api,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "resourceGroups": [
                {
                    "coveredResources": list(quota),
                    "flavors": [
                        {"name": name, "resources": [{"name": r, "nominalQuota": q} for r, q in quota.items()]}
                    ],
                }
            ],
            "preemption": {"withinClusterQueue": within_cluster_queue},
        },
    }
    local_queue = {
        "apiVersion": api,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": name},
    }
    return [flavor, cluster_queue, local_queue]
