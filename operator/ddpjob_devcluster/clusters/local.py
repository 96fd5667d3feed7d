"""The whole system on one machine: the API emulator, the real operator as its own
process (`ddpjob operator`, exactly what the operator image runs), and the process
kubelet. Used by the system tests, `make demo-cluster` and the latency benchmark.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import kubernetes
from kmock._internal import rendering

from ddpjob.api import names
from ddpjob_devcluster.apiserver import openapi, pod_logs
from ddpjob_devcluster.apiserver.emulator import KubeEmulator
from ddpjob_devcluster.clusters.client import JOBS, OperatorProcess
from ddpjob_devcluster.clusters.lifecycle import Cluster
from ddpjob_devcluster.controlplane.build import KUBERNETES
from ddpjob_devcluster.kubelet.kubelet import ProcessKubelet
from ddpjob_devcluster.scheduler.pod_groups import serve_native_pod_groups
from ddpjob_devcluster.scheduler.scheduler import NodeSpec, Scheduler


class ClusterEmulator(KubeEmulator):
    """The emulator, with the two things kubectl reads differently from kopf and the
    Python client (to be removed once the emulator does them): subresources
    carry no singular or short names (else `kubectl get po` is ambiguous with
    pods/status), and a watch is served as `application/json` (kmock streams say
    application/octet-stream, which `kubectl get -w` refuses to decode)."""

    async def _serve_version(self, request: Any) -> Any:
        doc = await super()._serve_version(request)
        if isinstance(doc, dict):
            for resource in doc.get("resources") or []:
                if "/" in resource["name"]:
                    resource.update(singularName="", shortNames=[])
        return doc

    def _serve_watch(self, request: Any) -> Any:
        return rendering.Response(payload=super()._serve_watch(request), headers={"Content-Type": "application/json"})

    async def _serve_server_version(self, request: Any) -> Any:
        """The Kubernetes release the real backend builds (hack/upstream), not kmock's
        k3s: kubectl compares it with its own for the supported version skew."""
        version = KUBERNETES.version()
        major, minor = version.lstrip("v").split(".")[:2]
        doc = await super()._serve_server_version(request)
        if not isinstance(doc, dict):  # kmock's is a dict; anything else passes through
            return doc
        return {
            **doc,
            "major": major,
            "minor": minor,
            "gitVersion": version,
            "gitCommit": "",
            "buildDate": "1970-01-01T00:00:00Z",
        }


def serve_empty_openapi(emulator: KubeEmulator) -> None:
    """`kubectl apply` validates against the server's OpenAPI document and refuses to
    apply when there is none. An empty v2 document (a zero-length protobuf message) says
    "no schemas": kubectl then leaves validation to the server, as it does for any type
    the document does not describe."""
    emulator["get /openapi/v2"] << b""


class LocalCluster(Cluster):
    """Emulator + CRD + operator process + process kubelet, in a work directory."""

    def __init__(
        self,
        workdir: str | pathlib.Path,
        *,
        namespace: str = "default",
        operator_namespace: str | None = None,
        stop_grace: float = 5.0,
        nodes: list[NodeSpec] | None = None,
    ):
        """nodes: start the development scheduler with these Nodes (and the native
        PodGroup API); the kubelet then runs only Pods bound to a node. None: no
        scheduler, every Pod runs at once (no capacity)."""
        self.workdir = pathlib.Path(workdir)
        self.nodes = nodes
        self.scheduler: Scheduler | None = None
        self.namespace = namespace
        self.operator_namespace = operator_namespace
        self.stop_grace = stop_grace
        self.emulator = ClusterEmulator()
        self.api: kubernetes.client.ApiClient | None = None
        self.kubelet: ProcessKubelet | None = None
        self.operator: OperatorProcess | None = None
        self.kubeconfig = self.workdir / "kubeconfig"

    # ---- the steps of its start (lifecycle.Cluster) ----

    def _start_api(self) -> None:
        self.emulator.start()
        serve_empty_openapi(self.emulator)
        openapi.serve(self.emulator)  # kubectl explain
        self.emulator.write_kubeconfig(self.kubeconfig, namespace=self.namespace)

    def _install(self) -> None:
        self.apply_crd()

    def _start_nodes(self) -> None:
        if self.nodes is not None:
            serve_native_pod_groups(self.emulator.store)
            self.scheduler = Scheduler(self.emulator.store)
            self.scheduler.add_nodes(self.nodes)
            self.scheduler.start()
        self.kubelet = ProcessKubelet(
            self.emulator.url,
            self.workdir / "kubelet",
            stop_grace=self.stop_grace,
            bound_only=self.scheduler is not None,
        ).start()
        pod_logs.attach(self.emulator, pod_logs.kubelet_source(self.kubelet))  # kubectl logs

    def _operator_process(self) -> OperatorProcess:
        return OperatorProcess(self.kubeconfig, self.workdir / "operator.log", self.operator_namespace)

    def _stop_nodes(self) -> None:
        """Every training process, then the scheduler."""
        if self.kubelet is not None:
            self.kubelet.stop()
        if self.scheduler is not None:
            self.scheduler.stop()

    def _stop_api(self) -> None:
        self.emulator.stop()

    # ---- reads straight from the emulator's store (no HTTP) ----

    def job(self, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        return self.emulator.get_object(JOBS, namespace or self.namespace, name)

    def pods(self, job: str | None = None, namespace: str | None = None) -> list[dict[str, Any]]:
        pods = self.emulator.list_objects("v1/pods", namespace or self.namespace)
        if job is not None:
            pods = [p for p in pods if (p["metadata"].get("labels") or {}).get(names.LABEL_JOB_NAME) == job]
        return sorted(pods, key=lambda p: p["metadata"]["name"])

    def events(self, name: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return [
            e
            for e in self.emulator.list_objects("v1/events", namespace or self.namespace)
            if (e.get("involvedObject") or {}).get("name") == name
        ]

    def diagnostics(self) -> str:
        """Everything needed to understand a failure: job statuses, Pods, events, logs."""
        parts = []
        for job in self.emulator.list_objects(JOBS):
            parts.append(f"DDPJob {job['metadata']['name']}: {json.dumps(job.get('status'), indent=1)}")
        for pod in self.emulator.list_objects("v1/pods"):
            parts.append(
                f"Pod {pod['metadata']['name']} labels={pod['metadata'].get('labels')} "
                f"status={json.dumps(pod.get('status'))}"
            )
        for event in self.emulator.list_objects("v1/events"):
            parts.append(f"Event {event.get('type')} {event.get('reason')}: {event.get('message')}")
        if self.operator is not None:
            parts.append("--- operator log ---\n" + self.operator.log_tail())
        if self.kubelet is not None:
            parts.append("--- containers ---\n" + self.kubelet.logs())
            if self.kubelet.errors:
                parts.append(f"--- kubelet errors --- {self.kubelet.errors!r}")
        return "\n".join(parts)
