"""The dev cluster on a real control plane: upstream etcd, kube-apiserver,
kube-controller-manager and kube-scheduler (`controlplane/`), process kubelets
registered as Nodes, and the operator installed from the Helm chart and authenticated
with the chart's ServiceAccount token. What a test asks of it is `ClusterClient`'s;
its start and stop, `lifecycle.Cluster`'s.

One control plane may serve many `RealCluster`s in turn (the test suite starts one per
worker): each gets a namespace, Nodes and an operator of its own, and gives them back
at `stop()`.
"""

from __future__ import annotations

import contextlib
import pathlib
import signal
import uuid
from collections.abc import Callable
from typing import Any

import kubernetes

from ddpjob.api import names
from ddpjob_devcluster.clusters.client import OperatorProcess, json_object, wait_until
from ddpjob_devcluster.clusters.lifecycle import Cluster
from ddpjob_devcluster.controlplane import install, pki
from ddpjob_devcluster.controlplane.controlplane import ControlPlane
from ddpjob_devcluster.controlplane.node import NodeAgent, NodeShape

# Room for any test's gang on CPU: the scheduler still places every Pod.
DEFAULT_NODES = (NodeShape("node-0", cpu="64", memory="256Gi"),)


class Kubelets:
    """Every node's process kubelet, seen as one: the tests ask for a Pod's container
    without caring which node runs it. All share one work directory, so a checkpoint
    volume is one directory whichever node mounts it (a RWX volume)."""

    def __init__(self, agents: list[NodeAgent], workdir: pathlib.Path):
        self.agents, self.workdir = agents, workdir

    @property
    def containers(self) -> dict[str, Any]:
        return {uid: c for agent in self.agents for uid, c in agent.kubelet.containers.items()}

    @property
    def errors(self) -> list[BaseException]:
        return [e for agent in self.agents for e in (*agent.kubelet.errors, *agent.errors)]

    def snapshot(self) -> list[Any]:
        every = [c for agent in self.agents for c in agent.kubelet.snapshot()]
        return sorted(every, key=lambda c: c.times.get("seen", 0))

    def _owner(self, pod: str, namespace: str) -> Any:
        for agent in self.agents:
            if agent.kubelet.container(pod, namespace, running=False) is not None:
                return agent.kubelet
        return self.agents[0].kubelet

    def container(self, pod: str, namespace: str, *, running: bool = True) -> Any:
        return self._owner(pod, namespace).container(pod, namespace, running=running)

    def kill(self, pod: str, namespace: str, sig: int = signal.SIGKILL) -> Any:
        return self._owner(pod, namespace).kill(pod, namespace, sig)

    def checkpoint_dir(self, job: str, namespace: str) -> pathlib.Path:
        return self.agents[0].kubelet.checkpoint_dir(job, namespace)

    def live_processes(self) -> list[int]:
        return [pid for agent in self.agents for pid in agent.kubelet.live_processes()]

    def logs(self, pod: str | None = None, tail: int = 40) -> str:
        return "\n".join(agent.kubelet.logs(pod, tail) for agent in self.agents)


class NamespacedKubelets(Kubelets):
    """The same, with the cluster's namespace as the default (a test says `kill('job-1')`
    for a Pod of its own namespace)."""

    def __init__(self, agents: list[NodeAgent], workdir: pathlib.Path, namespace: str):
        super().__init__(agents, workdir)
        self.namespace = namespace

    def container(self, pod: str, namespace: str | None = None, *, running: bool = True) -> Any:
        return super().container(pod, namespace or self.namespace, running=running)

    def kill(self, pod: str, namespace: str | None = None, sig: int = signal.SIGKILL) -> Any:
        return super().kill(pod, namespace or self.namespace, sig)

    def checkpoint_dir(self, job: str, namespace: str | None = None) -> pathlib.Path:
        return super().checkpoint_dir(job, namespace or self.namespace)


class RealCluster(Cluster):
    backend = "real"

    def __init__(
        self,
        workdir: str | pathlib.Path,
        *,
        plane: ControlPlane | None = None,
        namespace: str | None = None,
        nodes: tuple[NodeShape, ...] | list[NodeShape] = DEFAULT_NODES,
        scope: str = "namespace",
        stop_grace: float = 5.0,
        values: dict[str, Any] | None = None,
        api_port: int = 0,
        addresses: Callable[[], str] | None = None,
    ):
        """plane: a started control plane to use (else one of its own, its API server on
        `api_port`, default a free one). namespace: the jobs' namespace (default: a fresh
        one). scope: the chart's watch.scope. addresses: each Pod's IP (see kubelet/kubelet.py)."""
        self.workdir = pathlib.Path(workdir)
        self.own_plane = plane is None
        self.plane = plane or ControlPlane(self.workdir / "control-plane", port=api_port)
        self.addresses = addresses
        self.namespace = namespace or f"test-{uuid.uuid4().hex[:8]}"
        self.fresh_namespace = namespace is None
        suffix = uuid.uuid4().hex[:6]
        self.shapes = [NodeShape(f"{s.name}-{suffix}", s.cpu, s.memory, s.gpus, s.pods, s.labels) for s in nodes]
        self.scope, self.stop_grace, self.values = scope, stop_grace, dict(values or {})
        self.api: kubernetes.client.ApiClient | None = None
        self.agents: list[NodeAgent] = []
        self.kubelet: NamespacedKubelets | None = None
        self.operator: OperatorProcess | None = None
        self.deployment: install.OperatorDeployment | None = None
        self.kubeconfig = self.workdir / "kubeconfig"

    # ---- the steps of its start (lifecycle.Cluster) ----

    def _start_api(self) -> None:
        if self.own_plane:
            self.plane.start()
        pki.write_kubeconfig(
            self.kubeconfig,
            self.plane.server,
            self.plane.ca,
            user="ddpjob-admin",
            client=pki.Pair(self.plane.pki_dir / "admin.crt", self.plane.pki_dir / "admin.key"),
            namespace=self.namespace,
        )

    def _install(self) -> None:
        """The jobs' namespace, then the chart, rendered and applied (all but its Deployment)."""
        self._namespace()
        values: dict[str, Any] = {"metrics": {"enabled": False}, **self.values}
        if self.scope == "namespace":
            values["watch"] = {"scope": "namespace", "namespace": self.namespace}
            release_namespace = self.namespace
        else:
            values["watch"] = {"scope": "cluster"}
            release_namespace = "ddpjob-system"
            with contextlib.suppress(kubernetes.client.ApiException):
                self.core.create_namespace(
                    kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=release_namespace))
                )
        docs = install.render(release_namespace, values)
        install.apply(self.kubeconfig, docs, kubectl=self.kubectl_path())
        self.deployment = install.deployment(docs)

    def _start_nodes(self) -> None:
        kubelet_dir = self.workdir / "kubelet"
        ports: dict[Any, int] = {}  # one rendezvous port per job attempt on every Node
        for shape in self.shapes:
            self.agents.append(
                NodeAgent(
                    self.plane, shape, kubelet_dir, stop_grace=self.stop_grace, ports=ports, addresses=self.addresses
                ).start()
            )
        self.kubelet = NamespacedKubelets(self.agents, kubelet_dir, self.namespace)

    def _operator_process(self) -> OperatorProcess:
        """What the chart's Deployment runs, as its ServiceAccount (a token, as a kubelet projects it)."""
        deploy = self.deployment
        assert deploy is not None, "the chart is installed before the operator is made"
        token = install.service_account_token(self.client, deploy.service_account, deploy.namespace)
        config = self.plane.token_kubeconfig(
            self.workdir / "operator.kubeconfig",
            token,
            f"system:serviceaccount:{deploy.namespace}:{deploy.service_account}",
            namespace=deploy.namespace,
        )
        return OperatorProcess(
            config,
            self.workdir / "operator.log",
            command=deploy.command,
            env=install.operator_env(deploy, config),
            restart=True,  # the Deployment's kubelet: an operator that lost its Lease comes back
        )

    def _stop_nodes(self) -> None:
        for agent in self.agents:
            agent.stop()

    def _uninstall(self) -> None:
        """A namespace made for this cluster goes with it (with the plane, when its own)."""
        if self.fresh_namespace and not self.own_plane:
            with contextlib.suppress(kubernetes.client.ApiException):
                self.core.delete_namespace(self.namespace, _request_timeout=10)

    def _stop_api(self) -> None:
        if self.own_plane:
            self.plane.stop()

    def _namespace(self) -> None:
        with contextlib.suppress(kubernetes.client.ApiException):
            self.core.create_namespace(
                kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=self.namespace))
            )
        # The ServiceAccount admission plugin refuses Pods until the namespace's
        # `default` ServiceAccount exists; the ServiceAccount controller makes it.
        wait_until(
            lambda: self._exists(lambda: self.core.read_namespaced_service_account("default", self.namespace)),
            30,
            f"no default ServiceAccount in namespace {self.namespace}",
        )

    @staticmethod
    def _exists(read: Any) -> bool:
        try:
            read()
        except kubernetes.client.ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    # ---- storage: what a provisioner would do for the checkpoint claims ----

    def create_job(self, body: dict[str, Any]) -> dict[str, Any]:
        claim = ((body.get("spec") or {}).get("checkpoint") or {}).get("claimName")
        if claim:
            self.provide_claim(claim, body["metadata"].get("namespace", self.namespace))
        return super().create_job(body)

    def provide_claim(self, claim: str, namespace: str) -> None:
        """A bound ReadWriteMany claim, as a storage provisioner would make: the Pods'
        scheduling waits for it on a real API server (VolumeBinding). The process
        kubelet mounts the job's checkpoint directory whatever the volume says."""
        if self._exists(lambda: self.core.read_namespaced_persistent_volume_claim(claim, namespace)):
            return
        volume = f"pv-{namespace}-{claim}"[:253]
        path = self.workdir / "kubelet" / "claims" / namespace / claim
        path.mkdir(parents=True, exist_ok=True)
        k8s = kubernetes.client
        self.core.create_persistent_volume(
            k8s.V1PersistentVolume(
                metadata=k8s.V1ObjectMeta(name=volume),
                spec=k8s.V1PersistentVolumeSpec(
                    capacity={"storage": "1Gi"},
                    access_modes=["ReadWriteMany"],
                    storage_class_name="",
                    persistent_volume_reclaim_policy="Delete",
                    host_path=k8s.V1HostPathVolumeSource(path=str(path)),
                    claim_ref=k8s.V1ObjectReference(namespace=namespace, name=claim),
                ),
            )
        )
        self.core.create_namespaced_persistent_volume_claim(
            namespace,
            k8s.V1PersistentVolumeClaim(
                metadata=k8s.V1ObjectMeta(name=claim),
                spec=k8s.V1PersistentVolumeClaimSpec(
                    access_modes=["ReadWriteMany"],
                    storage_class_name="",
                    volume_name=volume,
                    resources=k8s.V1VolumeResourceRequirements(requests={"storage": "1Gi"}),
                ),
            ),
        )

    # ---- diagnostics ----

    def diagnostics(self) -> str:
        parts = []
        with contextlib.suppress(Exception):
            for job in json_object(
                self.custom.list_namespaced_custom_object(names.GROUP, names.VERSION, self.namespace, names.PLURAL)
            )["items"]:
                parts.append(f"DDPJob {job['metadata']['name']}: {job.get('status')}")
            for pod in self.pods():
                parts.append(
                    f"Pod {pod['metadata']['name']} node={pod['spec'].get('nodeName')} status={pod.get('status')}"
                )
            for event in self.client.sanitize_for_serialization(self.core.list_namespaced_event(self.namespace))[
                "items"
            ]:
                parts.append(
                    f"Event {event.get('type')} {event.get('reason')} "
                    f"{event['involvedObject'].get('name')}: {event.get('message')}"
                )
        if self.operator is not None:
            parts.append("--- operator log ---\n" + self.operator.log_tail())
        if self.kubelet is not None:
            parts.append("--- containers ---\n" + self.kubelet.logs())
        with contextlib.suppress(Exception):
            self.plane.check_alive()
        return "\n".join(parts)
