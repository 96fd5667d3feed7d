"""Fixtures for the operator's tests, the envtest way: the real operator (kopf, over HTTP,
in a thread of the test) against the worker's real kube-apiserver and etcd
(`control_plane`, tests/support/control_plane.py), the DDPJob CRD applied there once, and
for each test a namespace of its own that the operator watches. No kubelet: the tests
write each Pod's status themselves (`set_phase`), on a Node with no kubelet behind it
(`stand_in_node`) where the real kube-scheduler places the Pods.

The operator talks to the server through a fault proxy (scenarios/fault_proxy.py) that
presents the operator's client certificate for it: what the operator asked is in
`Cluster.requests` (RBAC's view of each request), its creates' bodies in `created`, and
a test makes the next matching requests slow or failing with `Cluster.inject_fault`.
The test's own calls go to the server directly, as the admin.

Tests use restartBackoffSeconds: 0 and short deadlines/TTLs, and poll with `wait_for`;
no test sleeps in place of an assertion. A wait ends when what it waits for happens; its
bound (tests.support.deadlines) only ends one that would hang.
"""

from __future__ import annotations

import contextlib
import copy
import pathlib
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

import kubernetes
import pytest
import yaml

from ddpjob_devcluster.clusters.client import get_job
from ddpjob_devcluster.clusters.operator_runner import run_operator, wait_for
from ddpjob_devcluster.controlplane import pki
from ddpjob_devcluster.scenarios.api_requests import Fault, RecordedRequest
from ddpjob_devcluster.scenarios.chaos import Chaos
from ddpjob_devcluster.scenarios.fault_proxy import FaultProxy
from tests.support.deadlines import REACTION
from tests.support.kubelet import set_pod_status

if TYPE_CHECKING:
    from ddpjob_devcluster.controlplane.controlplane import ControlPlane
    from tests.support.stand_in_node import StandInNode

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRD_PATH = ROOT / "manifests" / "crd" / "ddpjobs.ddpjob.io.yaml"
HANDLERS = "ddpjob.operator.handlers"
GROUP, VERSION, PLURAL = "ddpjob.io", "v1alpha1", "ddpjobs"
JOBS = f"{GROUP}/{VERSION}/{PLURAL}"


def ddpjob(name: str, **spec: Any) -> dict[str, Any]:
    spec.setdefault("image", "ddpjob/trainer:test")
    spec.setdefault("restartBackoffSeconds", 0)
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DDPJob", "metadata": {"name": name}, "spec": spec}


def _absent_on_404(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except kubernetes.client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


class Cluster:
    """A test's namespace on the real API server, seen as the admin through the official
    client, with the assertions' helpers; `proxy` is the operator's way to the server."""

    def __init__(
        self,
        plane: ControlPlane,
        api: kubernetes.client.ApiClient,
        namespace: str,
        proxy: FaultProxy,
        node: StandInNode,
    ):
        self.plane, self.api, self.ns, self.proxy, self.node = plane, api, namespace, proxy, node
        self.made: list[str] = []  # namespaces of this test, removed after it
        self.core = kubernetes.client.CoreV1Api(api)
        self.custom = kubernetes.client.CustomObjectsApi(api)

    # ---- what the operator asked (through the proxy) ----
    @property
    def requests(self) -> list[RecordedRequest]:
        return self.proxy.requests

    @property
    def created(self) -> list[tuple[RecordedRequest, Any]]:
        return self.proxy.created

    def inject_fault(self, **fault: Any) -> Fault:
        """The operator's next matching requests slow or failing (FaultProxy.inject_fault)."""
        return self.proxy.inject_fault(**fault)

    # ---- jobs ----
    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        return cast(dict[str, Any], self.custom.create_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, body))

    def patch_spec(self, name: str, **spec: Any) -> dict[str, Any]:
        return cast(
            dict[str, Any],
            self.custom.patch_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name, {"spec": spec}),
        )

    def delete(self, name: str) -> None:
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name)

    def job(self, name: str) -> dict[str, Any] | None:
        return get_job(self.custom, self.ns, name)

    def stored(self, name: str) -> dict[str, Any]:
        """The job as stored; it must be there."""
        job = self.job(name)
        assert job is not None, f"no DDPJob {name}"
        return job

    def status(self, name: str) -> dict[str, Any]:
        return (self.job(name) or {}).get("status") or {}

    def wait_phase(self, name: str, phase: str, timeout: float = REACTION, **fields: Any) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            st = self.status(name)
            ok = st.get("phase") == phase and all(st.get(k) == v for k, v in fields.items())
            return st if ok else None

        return wait_for(
            check,
            timeout=timeout,
            message=f"{name} did not reach {phase} {fields or ''}".strip(),
            describe=lambda: f"status {self.status(name)}",
        )

    @contextlib.contextmanager
    def unchecked_jobs(self) -> Iterator[None]:
        """The DDPJob CRD without its schema's checks (any spec is stored: a CRD installed
        without its rules, an older CRD version) for the `with` block, then the project's
        again: what a test stores meanwhile reaches the operator unchecked. The CRD is the
        worker's plane's; its tests run one at a time."""
        extensions = kubernetes.client.ApiextensionsV1Api(self.api)
        name = f"{PLURAL}.{GROUP}"
        loose = copy.deepcopy(yaml.safe_load(CRD_PATH.read_text()))
        for version in loose["spec"]["versions"]:
            version["schema"] = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
        self._replace_crd(extensions, name, loose, checked=False)
        try:
            yield
        finally:
            self._replace_crd(extensions, name, yaml.safe_load(CRD_PATH.read_text()), checked=True)

    def _replace_crd(self, extensions: Any, name: str, body: dict[str, Any], *, checked: bool) -> None:
        current = extensions.read_custom_resource_definition(name)
        body["metadata"]["resourceVersion"] = current.metadata.resource_version
        extensions.replace_custom_resource_definition(name, body)
        # The server serves the new schema a moment later: wait until a dry-run create of
        # a spec the rules refuse is refused (checked) or stored (unchecked).
        probe = ddpjob(f"schema-probe-{uuid.uuid4().hex[:6]}", nodes=0)

        def served() -> bool:
            try:
                self.custom.create_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, probe, dry_run="All")
            except kubernetes.client.ApiException as exc:
                if exc.status == 422:
                    return checked
                raise
            return not checked

        wait_for(served, timeout=REACTION, message=f"the DDPJob CRD's {'checked' if checked else 'unchecked'} schema")

    # ---- children ----
    def pods(self, job: str | None = None) -> list[dict[str, Any]]:
        selector = f"ddpjob.io/job-name={job}" if job is not None else None
        listing = self.core.list_namespaced_pod(self.ns, label_selector=selector)
        pods = self.api.sanitize_for_serialization(listing)["items"]
        return sorted(pods, key=lambda p: p["metadata"]["name"])

    def wait_pods(
        self, job: str, count: int, restart_count: int | None = None, timeout: float = REACTION
    ) -> list[dict]:
        def check() -> list[dict] | None:
            every = self.pods(job)
            pods = [p for p in every if not p["metadata"].get("deletionTimestamp")]
            if restart_count is not None:
                pods = [p for p in pods if p["metadata"]["labels"]["ddpjob.io/restart-count"] == str(restart_count)]
            return pods if len(pods) == count and len(every) == count else None

        return wait_for(
            check,
            timeout=timeout,
            message=f"{job}: expected {count} Pods (restart-count {restart_count})",
            describe=lambda: self.describe_pods(job),
        )

    def describe_pods(self, job: str | None = None) -> str:
        """Each Pod's name, attempt, node, phase and deletion: what a failed wait shows."""
        return (
            "; ".join(
                f"{p['metadata']['name']} attempt={p['metadata']['labels'].get('ddpjob.io/restart-count')} "
                f"node={p['spec'].get('nodeName')} phase={(p.get('status') or {}).get('phase')} "
                f"deleting={p['metadata'].get('deletionTimestamp')}"
                for p in self.pods(job)
            )
            + f"; status {self.status(job) if job else ''}"
        )

    def service(self, name: str) -> dict[str, Any] | None:
        found = _absent_on_404(lambda: self.core.read_namespaced_service(name, self.ns))
        return None if found is None else self.api.sanitize_for_serialization(found)

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        selector = f"involvedObject.name={name}" if name is not None else None
        listing = self.core.list_namespaced_event(self.ns, field_selector=selector)
        return self.api.sanitize_for_serialization(listing)["items"]

    def wait_event(self, name: str, reason: str, timeout: float = REACTION) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            return next((e for e in self.events(name) if e.get("reason") == reason), None)

        return wait_for(check, timeout=timeout, message=f"no {reason} event for {name}")

    # ---- the scheduler's and the kubelet's parts ----
    def bind(self, pod: str, node: str) -> None:
        """Place a Pod on a node as kube-scheduler does (the binding subresource); with the
        stand-in node cordoned (`node.cordoned()`), no scheduler placed it first."""
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        # _preload_content=False: the client cannot decode the Status the server answers with.
        self.core.create_namespaced_pod_binding(pod, self.ns, body, _preload_content=False)  # type: ignore[arg-type]  # a dict body: the client sends it as it is

    def set_phase(self, job: str, phase: str, ranks: list[int] | None = None, **kwargs: Any) -> None:
        for pod in self.pods(job):
            rank = int(pod["metadata"]["labels"]["ddpjob.io/node-rank"])
            if ranks is None or rank in ranks:
                set_pod_status(
                    self.core,
                    self.ns,
                    pod["metadata"]["name"],
                    phase,
                    containers=[c["name"] for c in pod["spec"]["containers"]],
                    **kwargs,
                )

    def run_gang(self, name: str, nodes: int, attempt: int = 0) -> dict[str, Any]:
        """The kubelet's part of one gang attempt: wait for its Pods, start them all, and
        wait until the job says Running; the status then."""
        self.wait_pods(name, nodes, restart_count=attempt)
        self.set_phase(name, "Running")
        return self.wait_phase(name, "Running", readyNodes=nodes, restarts=attempt)

    def start_running(self, body: dict[str, Any]) -> dict[str, Any]:
        """Create a DDPJob and bring its first gang to Running."""
        self.create(body)
        return self.run_gang(body["metadata"]["name"], body["spec"].get("nodes", 1))

    def run_to_success(self, name: str, nodes: int, attempt: int = 0) -> None:
        self.run_gang(name, nodes, attempt)
        self.set_phase(name, "Succeeded")
        self.wait_phase(name, "Succeeded")

    def writes_for(self, job: str) -> list[RecordedRequest]:
        """The operator's write requests (Pods and the job's status included). Only the
        operator's requests go through the proxy: the kubelet's pods/status writes and the
        test's own calls are not among them (the filters say so where a log has them)."""
        return [
            r
            for r in self.requests
            if r.verb in ("create", "update", "patch", "delete")
            and not (r.resource == "pods" and r.subresource == "status")
            and not (r.resource == PLURAL and r.verb == "create")
            and r.resource != "customresourcedefinitions"
        ]

    def in_namespace(self, namespace: str) -> Cluster:
        """The same cluster seen in another namespace (its requests and faults shared)."""
        other = Cluster(self.plane, self.api, namespace, self.proxy, self.node)
        other.made = self.made
        return other

    def make_namespace(self, prefix: str) -> str:
        """Another namespace for this test (removed with its own)."""
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self.made.append(name)
        make_namespace(self.core, name)
        return name


def make_namespace(core: kubernetes.client.CoreV1Api, name: str) -> None:
    """A namespace that takes Pods: the ServiceAccount admission plugin refuses them until
    the ServiceAccount controller made its `default` account."""
    core.create_namespace(kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=name)))
    wait_for(
        lambda: _absent_on_404(lambda: core.read_namespaced_service_account("default", name)) is not None,
        timeout=REACTION,
        message=f"no default ServiceAccount in namespace {name}",
    )


@pytest.fixture(scope="session")
def operator_identity(control_plane: ControlPlane) -> pki.Pair:
    """The in-process operator's client certificate: one user for the worker's operators,
    in system:masters (RBAC is the chart's, checked by tests/deploy and the system tests)."""
    assert control_plane.authority is not None  # started
    return control_plane.authority.issue("operator-tests", "ddpjob-operator-tests", org="system:masters")


@pytest.fixture
def crd(ddpjob_crd: dict[str, Any]) -> dict[str, Any]:
    return ddpjob_crd


@pytest.fixture
def cluster(
    control_plane: ControlPlane,
    crd: dict[str, Any],
    stand_in_node: StandInNode,
    operator_identity: pki.Pair,
) -> Iterator[Cluster]:
    control_plane.check_alive()
    api = kubernetes.config.new_client_from_config(str(control_plane.admin_kubeconfig))
    namespace = f"op-{uuid.uuid4().hex[:8]}"
    proxy = FaultProxy(
        control_plane.server,
        control_plane.ca,
        Chaos(rate=0.0, watch_lifetime=None),
        client=(operator_identity.cert, operator_identity.key),
        shutdown_grace=0.1,  # the operator has stopped: its watches have no one to serve
    ).start()
    cluster = Cluster(control_plane, api, namespace, proxy, stand_in_node)
    cluster.made.append(namespace)
    try:
        make_namespace(cluster.core, namespace)
        yield cluster
    finally:
        proxy.stop()
        for name in cluster.made:  # its objects go with it; the stand-in node ends its Pods
            with contextlib.suppress(kubernetes.client.ApiException):
                cluster.core.delete_namespace(name, _request_timeout=10)
        api.close()
        control_plane.check_alive()


@pytest.fixture
def kubeconfig(control_plane: ControlPlane, cluster: Cluster, tmp_path: pathlib.Path) -> pathlib.Path:
    """The admin's kubeconfig, its namespace the test's."""
    admin = pki.Pair(control_plane.pki_dir / "admin.crt", control_plane.pki_dir / "admin.key")
    return pki.write_kubeconfig(
        tmp_path / "kubeconfig",
        control_plane.server,
        control_plane.ca,
        user="ddpjob-admin",
        client=admin,
        namespace=cluster.ns,
    )


@pytest.fixture
def operator_kubeconfig(cluster: Cluster, tmp_path: pathlib.Path) -> pathlib.Path:
    """The operator's way to the server: the proxy (plain HTTP on loopback; the proxy
    presents the operator's certificate)."""
    path = tmp_path / "operator.kubeconfig"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "proxy", "cluster": {"server": cluster.proxy.url}}],
        "users": [{"name": "operator", "user": {}}],
        "contexts": [
            {"name": "operator", "context": {"cluster": "proxy", "user": "operator", "namespace": cluster.ns}}
        ],
        "current-context": "operator",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def fast_settings(settings: Any) -> None:
    # Test-only: quick watch reconnects; the runner's defaults already retry API errors fast.
    settings.watching.reconnect_backoff = 0.05


_DEFAULT = object()


@pytest.fixture
def start_operator(cluster: Cluster, operator_kubeconfig: pathlib.Path) -> Iterator[Callable[..., Any]]:
    """Start (and at the end stop) the real operator, on the test's namespace by default
    (`namespace=None`: every namespace); callable again after a stop."""
    runs: list[Any] = []

    def start(namespace: Any = _DEFAULT, **kwargs: Any) -> Any:
        namespace = cluster.ns if namespace is _DEFAULT else namespace
        kwargs.setdefault("configure", fast_settings)
        ctx = run_operator(operator_kubeconfig, HANDLERS, namespace=namespace, clusterwide=namespace is None, **kwargs)
        run = ctx.__enter__()
        runs.append((ctx, run))
        return run

    yield start
    for ctx, run in reversed(runs):
        if run.alive:
            ctx.__exit__(None, None, None)


@pytest.fixture
def operator(start_operator: Callable[..., Any]) -> Any:
    return start_operator()


@pytest.fixture
def lifecycle_request_log(cluster: Cluster, operator: Any) -> list[RecordedRequest]:
    """The operator's requests (RBAC verb, group, resource, subresource, namespace, name)
    after one DDPJob went its whole life: created, Running, a gang restart, Succeeded,
    deleted by its TTL. A chart test compares them with the rendered ClusterRole (every
    (group, resource[/subresource], verb) here must be granted). Only the operator's
    requests go through the proxy that logs them: the test's and the kubelet's are not here."""
    cluster.start_running(ddpjob("rbac", nodes=2, ttlSecondsAfterFinished=0, restartPolicy="OnFailure"))
    cluster.set_phase("rbac", "Failed", ranks=[1], exit_code=137)
    cluster.run_gang("rbac", 2, attempt=1)
    cluster.set_phase("rbac", "Succeeded")
    wait_for(lambda: cluster.job("rbac") is None, timeout=REACTION, message="the TTL did not delete the job")
    return list(cluster.requests)
