"""Fixtures of the process kubelet's tests: a Node of the test's own on the worker's real
control plane (`NodeAgent`: the Node, its lease, its log server and the process kubelet,
with the node's own identity), and a namespace of the test's own. Pods are bound to the
Node by the test (`spec.nodeName`), as a scheduler would: no operator, no scheduler's
choice. The kubelet is stopped at the end with no process left and no error."""

from __future__ import annotations

import contextlib
import pathlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import kubernetes
import pytest

from ddpjob_devcluster.clusters.client import wait_until
from ddpjob_devcluster.controlplane.node import NodeAgent, NodeShape
from ddpjob_devcluster.kubelet.kubelet import ProcessKubelet
from tests.support.deadlines import REACTION


@dataclass
class KubeletNode:
    core: kubernetes.client.CoreV1Api
    ns: str
    agent: NodeAgent

    @property
    def kubelet(self) -> ProcessKubelet:
        return self.agent.kubelet

    def pod_dir(self, pod: str) -> pathlib.Path:
        """The directory the Pod's newest container ran in (its log, what it wrote)."""
        container = self.kubelet.container(pod, self.ns, running=False)
        assert container is not None, f"no container of {pod} ran"
        return pathlib.Path(container.log_path).parent

    def create_pod(self, pod: dict[str, Any]) -> None:
        """`pod` in the test's namespace, bound to its Node."""
        body = {**pod, "metadata": {**pod["metadata"], "namespace": self.ns}}
        body["spec"] = {**pod["spec"], "nodeName": self.agent.name}
        self.core.create_namespaced_pod(self.ns, body)  # type: ignore[arg-type]  # a dict body: the client sends it as it is

    def pod(self, name: str) -> dict[str, Any] | None:
        try:
            found = self.core.read_namespaced_pod(name, self.ns)
        except kubernetes.client.ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return self.core.api_client.sanitize_for_serialization(found)

    def status(self, name: str) -> dict[str, Any]:
        return (self.pod(name) or {}).get("status") or {}

    def wait_phase(self, name: str, phase: str) -> dict[str, Any]:
        return wait_until(
            lambda: (st := self.status(name)).get("phase") == phase and st,
            REACTION,
            f"{name} did not reach {phase}",
            lambda: (self.status(name), self.kubelet.logs()),
        )


@pytest.fixture
def node(control_plane: Any, tmp_path: pathlib.Path) -> Iterator[KubeletNode]:
    suffix = uuid.uuid4().hex[:8]
    admin = kubernetes.config.new_client_from_config(str(control_plane.admin_kubeconfig))
    core = kubernetes.client.CoreV1Api(admin)
    ns = f"kubelet-{suffix}"
    core.create_namespace({"metadata": {"name": ns}})  # type: ignore[arg-type]  # a dict body: the client sends it as it is
    # The ServiceAccount admission plugin refuses Pods until the namespace's `default`
    # ServiceAccount exists; the ServiceAccount controller makes it.
    wait_until(
        lambda: core.list_namespaced_service_account(ns, field_selector="metadata.name=default").items,
        REACTION,
        f"no default ServiceAccount in namespace {ns}",
    )
    agent = NodeAgent(control_plane, NodeShape(f"kubelet-{suffix}"), tmp_path / "kubelet", stop_grace=1.0).start()
    try:
        yield KubeletNode(core, ns, agent)
    finally:
        agent.stop()
        with contextlib.suppress(kubernetes.client.ApiException):
            core.delete_namespace(ns)
        admin.close()
        assert agent.kubelet.live_processes() == []
        assert agent.kubelet.errors == [] and agent.errors == []
