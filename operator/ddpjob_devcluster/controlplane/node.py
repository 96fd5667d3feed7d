"""A node of the real dev cluster: the process kubelet, registered as a Node.

As a kubelet does on start (pkg/kubelet/kubelet_node_status.go), it creates its Node
with capacity and allocatable (cpu, memory, pods, and `nvidia.com/gpu` for a GPU node,
as the NVIDIA device plugin advertises it), the Ready condition, its InternalIP and the
port of its log endpoint; it renews its Lease in `kube-node-lease` every 10 s
(pkg/kubelet/nodelease), which the node lifecycle controller reads as its heartbeat.
It acts with its own identity, `system:node:<name>`, so the Node authorizer and
NodeRestriction limit it as they limit a kubelet. Stopping it stops its containers and
removes the Node, so a later test's Pods are never scheduled onto it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import pathlib
import threading
from collections.abc import Callable
from typing import Any

import kubernetes

from ddpjob_devcluster.controlplane.kubelet_server import KubeletServer
from ddpjob_devcluster.kubelet.kubelet import ProcessKubelet

LEASE_SECONDS = 40  # kubelet's nodeLeaseDurationSeconds
RENEW_SECONDS = 10  # a quarter of it, as the kubelet renews
GPU = "nvidia.com/gpu"


@dataclasses.dataclass(frozen=True)
class NodeShape:
    name: str
    cpu: str = "16"
    memory: str = "64Gi"
    gpus: int = 0
    pods: int = 110
    labels: tuple[tuple[str, str], ...] = ()


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def node_object(shape: NodeShape, kubelet_port: int) -> dict[str, Any]:
    resources = {"cpu": shape.cpu, "memory": shape.memory, "pods": str(shape.pods)}
    if shape.gpus:
        resources[GPU] = str(shape.gpus)
    now = _now()
    labels = {
        "kubernetes.io/hostname": shape.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        **dict(shape.labels),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": shape.name, "labels": labels},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "process kubelet is posting ready status",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": shape.name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},
            "nodeInfo": {
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
                "kernelVersion": "",
                "osImage": "ddpjob process kubelet",
                "containerRuntimeVersion": "process://",
                "kubeletVersion": "v0.0.0-ddpjob-process-kubelet",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


class NodeAgent:
    """`start()` registers the Node and runs its Pods; `stop()` undoes both."""

    def __init__(
        self,
        plane: Any,
        shape: NodeShape,
        workdir: pathlib.Path,
        *,
        stop_grace: float = 5.0,
        ports: dict[Any, int] | None = None,
        addresses: Callable[[], str] | None = None,
    ):
        self.plane, self.shape = plane, shape
        self.workdir = pathlib.Path(workdir)
        self.kubeconfig = plane.node_kubeconfig(shape.name)
        self.kubelet = ProcessKubelet(
            plane.server,
            self.workdir,
            stop_grace=stop_grace,
            kubeconfig=self.kubeconfig,
            node_name=shape.name,
            ports=ports,
            addresses=addresses,
        )
        pair = plane.authority.issue(f"kubelet-{shape.name}", shape.name, server=True, hosts=("127.0.0.1",))
        self.server = KubeletServer(self._find_log, pair.cert, pair.key, plane.ca)
        self._stopping = threading.Event()
        self._lease_thread = threading.Thread(target=self._renew_lease, name=f"lease-{shape.name}", daemon=True)
        self.errors: list[BaseException] = []

    @property
    def name(self) -> str:
        return self.shape.name

    def _core(self) -> kubernetes.client.CoreV1Api:
        return kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(str(self.kubeconfig)))

    def start(self) -> NodeAgent:
        self.server.start()
        core = self._core()
        try:
            # A dict body: the client sends it as it is (its annotation names only the model class).
            core.create_node(node_object(self.shape, self.server.port))  # type: ignore[arg-type]
        finally:
            core.api_client.close()
        self._lease_thread.start()
        self.kubelet.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self.kubelet.stop()
        self.server.stop()
        if self._lease_thread.is_alive():
            self._lease_thread.join(timeout=5)
        admin = kubernetes.config.new_client_from_config(str(self.plane.admin_kubeconfig))
        with contextlib.suppress(kubernetes.client.ApiException), admin:
            kubernetes.client.CoreV1Api(admin).delete_node(self.name, _request_timeout=10)

    def _find_log(self, namespace: str, pod: str, container: str) -> Any:
        for c in reversed(self.kubelet.snapshot()):
            if c.namespace == namespace and c.pod == pod and container == c.name:
                return c.log_path, (lambda c=c: c.running)
        return None

    def _renew_lease(self) -> None:
        client = kubernetes.config.new_client_from_config(str(self.kubeconfig))
        leases = kubernetes.client.CoordinationV1Api(client)
        body: dict[str, Any] = {
            "metadata": {"name": self.name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": self.name, "leaseDurationSeconds": LEASE_SECONDS},
        }
        created = False
        delay = 0.0
        try:
            while not self._stopping.wait(delay):
                body["spec"]["renewTime"] = _now()
                try:
                    if not created:
                        # A dict body: the client sends it as it is (its annotation names only the model class).
                        leases.create_namespaced_lease("kube-node-lease", body, _request_timeout=10)  # type: ignore[arg-type]
                        created = True
                    else:
                        leases.patch_namespaced_lease(
                            self.name,
                            "kube-node-lease",
                            {"spec": {"renewTime": body["spec"]["renewTime"]}},
                            _request_timeout=10,
                        )
                    delay = RENEW_SECONDS
                except kubernetes.client.ApiException as exc:
                    created = created or exc.status == 409
                    delay = 1.0  # the server may be busy: try again soon, well inside the lease
                except Exception:  # noqa: BLE001 - a heartbeat must not die; report at stop
                    delay = 1.0
        except BaseException as exc:  # noqa: BLE001 - the heartbeat thread's end, surfaced through .errors
            self.errors.append(exc)
        finally:
            client.close()
