"""The operator's tests' fixtures on the API emulator, for the test files not yet moved
onto the real kube-apiserver (tests/operator/conftest.py): such a file imports them by
name, which overrides the conftest's. The real operator (kopf, over HTTP) against the
emulator, the CRD applied with the official client, and helpers that play the kubelet.

Tests use restartBackoffSeconds: 0 and short deadlines/TTLs, and poll with `wait_for`;
no test sleeps in place of an assertion. A wait ends when what it waits for happens; its
bound (tests.support.deadlines) only ends one that would hang.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Iterator
from typing import Any, cast

import kubernetes
import pytest
import yaml

from ddpjob_devcluster.apiserver.emulator import KubeEmulator
from ddpjob_devcluster.apiserver.request_log import RecordedRequest
from ddpjob_devcluster.clusters.operator_runner import run_operator, wait_for
from tests.support.deadlines import REACTION
from tests.support.kubelet import set_pod_status

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRD_PATH = ROOT / "manifests" / "crd" / "ddpjobs.ddpjob.io.yaml"
HANDLERS = "ddpjob.operator.handlers"
NS = "default"
GROUP, VERSION, PLURAL = "ddpjob.io", "v1alpha1", "ddpjobs"
JOBS = f"{GROUP}/{VERSION}/{PLURAL}"


def ddpjob(name: str, **spec: Any) -> dict[str, Any]:
    spec.setdefault("image", "ddpjob/trainer:test")
    spec.setdefault("restartBackoffSeconds", 0)
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DDPJob", "metadata": {"name": name}, "spec": spec}


class Cluster:
    """The emulator seen through the official client, with the assertions' helpers."""

    def __init__(self, emulator: KubeEmulator, api: kubernetes.client.ApiClient, namespace: str = NS):
        self.emulator, self.api, self.ns = emulator, api, namespace
        self.core = kubernetes.client.CoreV1Api(api)
        self.custom = kubernetes.client.CustomObjectsApi(api)

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
        return self.emulator.get_object(JOBS, self.ns, name)

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
            message=f"{name} did not reach {phase} {fields or ''}".strip() + f" (status {self.status(name)})",
        )

    # ---- children ----
    def pods(self, job: str | None = None) -> list[dict[str, Any]]:
        pods = self.emulator.list_objects("v1/pods", self.ns)
        if job is not None:
            pods = [p for p in pods if (p["metadata"].get("labels") or {}).get("ddpjob.io/job-name") == job]
        return sorted(pods, key=lambda p: p["metadata"]["name"])

    def wait_pods(
        self, job: str, count: int, restart_count: int | None = None, timeout: float = REACTION
    ) -> list[dict]:
        def check() -> list[dict] | None:
            pods = [p for p in self.pods(job) if not p["metadata"].get("deletionTimestamp")]
            if restart_count is not None:
                pods = [p for p in pods if p["metadata"]["labels"]["ddpjob.io/restart-count"] == str(restart_count)]
            return pods if len(pods) == count and len(self.pods(job)) == count else None

        return wait_for(check, timeout=timeout, message=f"{job}: expected {count} Pods (restart-count {restart_count})")

    def service(self, name: str) -> dict[str, Any] | None:
        return self.emulator.get_object("v1/services", self.ns, name)

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        events = self.emulator.list_objects("v1/events", self.ns)
        if name is not None:
            events = [e for e in events if (e.get("involvedObject") or {}).get("name") == name]
        return events

    def wait_event(self, name: str, reason: str, timeout: float = REACTION) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            return next((e for e in self.events(name) if e.get("reason") == reason), None)

        return wait_for(check, timeout=timeout, message=f"no {reason} event for {name}")

    # ---- the kubelet's part ----
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
        """The operator's write requests on behalf of one job (Pods and the job's status
        included; the kubelet's pods/status writes and the test's own calls excluded)."""
        return [
            r
            for r in self.emulator.requests
            if r.verb in ("create", "update", "patch", "delete")
            and not (r.resource == "pods" and r.subresource == "status")
            and not (r.resource == PLURAL and r.verb == "create")
            and r.resource != "customresourcedefinitions"
        ]


@pytest.fixture
def kubeconfig(emulator: KubeEmulator, tmp_path: pathlib.Path) -> pathlib.Path:
    return emulator.write_kubeconfig(tmp_path / "kubeconfig", namespace=NS)


@pytest.fixture
def crd(api: kubernetes.client.ApiClient) -> dict[str, Any]:
    """The project's CRD, applied over HTTP as `kubectl apply` / Helm would."""
    body = yaml.safe_load(CRD_PATH.read_text())
    kubernetes.client.ApiextensionsV1Api(api).create_custom_resource_definition(body)
    return body


@pytest.fixture
def cluster(emulator: KubeEmulator, api: kubernetes.client.ApiClient, crd: dict) -> Cluster:
    return Cluster(emulator, api)


def fast_settings(settings: Any) -> None:
    # Test-only: quick watch reconnects; the runner's defaults already retry API errors fast.
    settings.watching.reconnect_backoff = 0.05


@pytest.fixture
def start_operator(emulator: KubeEmulator, crd: dict) -> Iterator[Callable[..., Any]]:
    """Start (and at the end stop) the real operator; callable again after a stop."""
    runs: list[Any] = []

    def start(namespace: str | None = NS, **kwargs: Any) -> Any:
        kwargs.setdefault("configure", fast_settings)
        ctx = run_operator(emulator, HANDLERS, namespace=namespace, clusterwide=namespace is None, **kwargs)
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
    """The emulator's request log (RBAC verb, group, resource, subresource, namespace, name)
    after one DDPJob went its whole life: created, Running, a gang restart, Succeeded,
    deleted by its TTL. A chart test compares the operator's part of it with the rendered
    ClusterRole (every (group, resource[/subresource], verb) here must be granted).
    The test's and the kubelet's own requests are in the log too: filter them by what the
    operator is (kopf's watches, the operator's writes) or compare as a superset."""
    cluster.start_running(ddpjob("rbac", nodes=2, ttlSecondsAfterFinished=0, restartPolicy="OnFailure"))
    cluster.set_phase("rbac", "Failed", ranks=[1], exit_code=137)
    cluster.run_gang("rbac", 2, attempt=1)
    cluster.set_phase("rbac", "Succeeded")
    wait_for(lambda: cluster.job("rbac") is None, timeout=REACTION, message="the TTL did not delete the job")
    return list(cluster.emulator.requests)
