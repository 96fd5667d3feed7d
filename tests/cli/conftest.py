"""Fixtures of the cluster commands' tests (test_cluster_commands, test_resubmit,
test_tensorboard_command), the envtest way: the worker's real kube-apiserver and etcd
(`control_plane`, tests/support/control_plane.py; no Node and no operator, since these
commands only read and write DDPJobs), the project's CRD installed on it once (`ddpjob_crd`), and for
each test a namespace of its own, `team-a-<id>`, with the user's kubeconfig pointing at
it (KUBECONFIG). The user is the plane's admin; `bind` (tests/support/cluster_users.py)
makes a narrower one."""

from __future__ import annotations

import contextlib
import pathlib
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import kubernetes
import pytest

from ddpjob.api import names
from ddpjob_devcluster.clusters.client import get_job
from ddpjob_devcluster.controlplane import pki

if TYPE_CHECKING:
    from ddpjob_devcluster.controlplane.controlplane import ControlPlane


class Namespace:
    """A test's namespace on the real API server, and what its tests ask of it as the admin:
    a stored job, its status written as an operator would, another namespace."""

    def __init__(self, plane: ControlPlane, kubeconfig: pathlib.Path, namespace: str):
        self.plane, self.kubeconfig, self.namespace = plane, kubeconfig, namespace
        self.api = kubernetes.config.new_client_from_config(str(kubeconfig))
        self.core = kubernetes.client.CoreV1Api(self.api)
        self.custom = kubernetes.client.CustomObjectsApi(self.api)
        self.made: list[str] = []

    def make_namespace(self, prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self.core.create_namespace(kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=name)))
        self.made.append(name)
        return name

    def job(self, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        return get_job(self.custom, namespace or self.namespace, name)

    def set_status(self, name: str, **fields: Any) -> None:
        """A merge patch of the job's status subresource (a None field is removed)."""
        self.custom.patch_namespaced_custom_object_status(
            names.GROUP, names.VERSION, self.namespace, names.PLURAL, name, {"status": fields}
        )

    def delete(self) -> None:
        """The namespaces go, and their jobs with them (no finalizer holds a job here: no operator runs)."""
        for name in self.made:
            with contextlib.suppress(kubernetes.client.ApiException):
                self.core.delete_namespace(name, _request_timeout=10)
        self.api.close()


@pytest.fixture
def cluster(
    control_plane: ControlPlane, ddpjob_crd: None, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Namespace]:
    control_plane.check_alive()
    admin = pki.Pair(control_plane.pki_dir / "admin.crt", control_plane.pki_dir / "admin.key")
    path = tmp_path / "kubeconfig"
    name = f"team-a-{uuid.uuid4().hex[:8]}"
    pki.write_kubeconfig(
        path, control_plane.server, control_plane.ca, user="ddpjob-admin", client=admin, namespace=name
    )
    namespace = Namespace(control_plane, path, name)
    namespace.core.create_namespace(kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=name)))
    namespace.made.append(name)
    monkeypatch.setenv("KUBECONFIG", str(path))
    try:
        yield namespace
    finally:
        namespace.delete()


@pytest.fixture
def kubeconfig(cluster: Namespace) -> pathlib.Path:
    return cluster.kubeconfig


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every request this process's kubernetes client sends from here on (method, URL): what
    an in-process `main()` sent, and so what it did not."""
    requests: list[tuple[str, str]] = []
    real = kubernetes.client.rest.RESTClientObject.request

    def spy(self: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        requests.append((method, url))
        return real(self, method, url, *args, **kwargs)

    monkeypatch.setattr(kubernetes.client.rest.RESTClientObject, "request", spy)
    return requests


def writes(sent: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(method, url) for method, url in sent if method not in ("GET", "HEAD", "OPTIONS")]
