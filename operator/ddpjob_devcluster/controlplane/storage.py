"""Storage as a cluster offers it: a default StorageClass whose claims a provisioner
fulfils, so a PersistentVolumeClaim that names no class is bound (as on kind, whose
default class is `standard`).

The provisioner is kube-controller-manager's own (`--enable-hostpath-provisioner`,
pkg/volume/hostpath): for each claim of a class with provisioner
`kubernetes.io/host-path` it makes a directory `/tmp/hostpath_pv/<uid>` and a
PersistentVolume with the claim's access modes (ReadWriteMany included), and deletes
the directory when the claim is deleted (reclaim policy Delete). Upstream meant it for
single-machine test clusters, which this one is: every node is this machine.

The process kubelet gives a Pod's checkpoint volume a directory of its own, whatever the
claim (see kubelet.py); what the provisioner made is removed when the cluster stops
(`provisioned()` before, `remove()` after), since its PersistentVolumes go with etcd.
"""

from __future__ import annotations

import contextlib
import pathlib
import re
import shutil
from typing import Any

import kubernetes

CLASS_NAME = "standard"
PROVISIONER = "kubernetes.io/host-path"
DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
# What pkg/volume/hostpath's provisioner makes, and all its deleter accepts.
PROVISIONED_PATH = re.compile(r"/tmp/hostpath_pv/[0-9a-f-]{36}")
KCM_FLAGS = ("--enable-hostpath-provisioner",)


def default_class() -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": CLASS_NAME, "annotations": {DEFAULT_CLASS: "true"}},
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    }


def install(kubeconfig: pathlib.Path) -> None:
    """Create the default StorageClass (kept if it is there)."""
    with kubernetes.config.new_client_from_config(str(kubeconfig)) as api:
        try:
            storage = kubernetes.client.StorageV1Api(api)
            # A dict body: the client sends it as it is (its annotation names only the model class).
            storage.create_storage_class(default_class(), _request_timeout=30)  # type: ignore[arg-type]
        except kubernetes.client.ApiException as exc:
            if exc.status != 409:
                raise


def provisioned(kubeconfig: pathlib.Path) -> list[pathlib.Path]:
    """The directories the provisioner made for this cluster's volumes (none when the API
    server does not answer: then nothing is known to be this cluster's)."""
    paths = []
    with contextlib.suppress(Exception), kubernetes.config.new_client_from_config(str(kubeconfig)) as api:
        for volume in kubernetes.client.CoreV1Api(api).list_persistent_volume(_request_timeout=10).items:
            spec = volume.spec
            if spec is None:
                continue
            host_path = spec.host_path.path if spec.host_path else ""
            if spec.storage_class_name == CLASS_NAME and PROVISIONED_PATH.fullmatch(host_path or ""):
                paths.append(pathlib.Path(host_path))
    return paths


def remove(paths: list[pathlib.Path]) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
    if paths:  # and their folder once no cluster has a volume in it (a provisioner makes it again)
        with contextlib.suppress(OSError):
            paths[0].parent.rmdir()
