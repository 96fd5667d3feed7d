"""Where the objects the operator reads and writes live on the API: their URL paths.

The DDPJob, the Pods and Services it creates, a job's TensorBoard Deployment, each gang
integration's PodGroups (their collection's plural comes from the integration's
description, `api/gangs`), and the Lease its replicas elect their leader in. Pure: kube.py
sends the requests, children.py, tensorboard.py, the status writer and leader_election.py
name what they touch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ddpjob.api import gangs, names


def pods_path(namespace: str, name: str | None = None) -> str:
    base = f"/api/v1/namespaces/{namespace}/pods"
    return f"{base}/{name}" if name else base


def job_path(namespace: str, name: str) -> str:
    return f"/apis/{names.GROUP}/{names.VERSION}/namespaces/{namespace}/{names.PLURAL}/{name}"


def lease_path(namespace: str, name: str | None = None) -> str:
    base = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    return f"{base}/{name}" if name else base


# What the operator creates for its jobs, by (apiVersion, kind): the plural of its collection (and the
# PodGroups of the gang integrations: created_kinds()).
CREATED_KINDS = {
    ("v1", "Pod"): "pods",
    ("v1", "Service"): "services",
    ("apps/v1", "Deployment"): "deployments",
    ("networking.k8s.io/v1", "NetworkPolicy"): "networkpolicies",
}


def created_kinds() -> dict[tuple[str, str], str]:
    groups = (i.pod_group for name in gangs.names() if (i := gangs.get(name)) is not None)
    return {**CREATED_KINDS, **{(g.api_version, g.kind): g.plural for g in groups if g is not None}}


def object_path(api_version: str, kind: str, namespace: str, name: str | None = None) -> str:
    kinds = created_kinds()
    plural = kinds.get((api_version, kind))
    if plural is None:
        raise ValueError(f"the operator creates only {sorted(kinds)}, not {api_version} {kind}")
    base = (
        f"/api/v1/namespaces/{namespace}/{plural}"
        if api_version == "v1"
        else (f"/apis/{api_version}/namespaces/{namespace}/{plural}")
    )
    return f"{base}/{name}" if name else base


def collection_path(obj: Mapping[str, Any]) -> str:
    return object_path(obj.get("apiVersion", "v1"), obj["kind"], obj["metadata"]["namespace"])
