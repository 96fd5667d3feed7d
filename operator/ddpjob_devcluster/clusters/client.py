"""What the system tests, the demo and the benchmarks do with a dev cluster (the real
control plane, `real.RealCluster`): the API clients, creating
a job and waiting for its phase, kubectl with the cluster's kubeconfig, the operator as
its own process (operator_process.py).
"""

from __future__ import annotations

import contextlib
import json
import pathlib
import subprocess
import time
from typing import Any

import kubernetes
import yaml

from ddpjob.api import names
from ddpjob.cluster import kubectl

# Where the demo, the tests and the benchmarks have always found them.
from ddpjob_devcluster.clusters.operator_process import (
    BIN as BIN,
    OperatorProcess as OperatorProcess,
    ddpjob_command as ddpjob_command,
)
from ddpjob_devcluster.clusters.operator_runner import Abort, wait_for

ROOT = pathlib.Path(__file__).resolve().parents[3]
CRD_PATH = ROOT / "manifests" / "crd" / "ddpjobs.ddpjob.io.yaml"
EXAMPLE = ROOT / "manifests" / "examples" / "mnist-cpu.yaml"
JOBS = f"{names.GROUP}/{names.VERSION}/{names.PLURAL}"


def json_object(answer: object) -> dict[str, Any]:
    """A custom objects API answer (typed `object` by the client): a JSON object."""
    if not isinstance(answer, dict):
        raise TypeError(f"the API answered {type(answer).__name__} where an object was expected")
    return answer


def get_job(custom: kubernetes.client.CustomObjectsApi, namespace: str, name: str) -> dict[str, Any] | None:
    """The DDPJob as the API server has it, or None where there is none."""
    try:
        return json_object(
            custom.get_namespaced_custom_object(names.GROUP, names.VERSION, namespace, names.PLURAL, name)
        )
    except kubernetes.client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


class ClusterClient:
    """The client side of a dev cluster; a backend sets `api`, `kubeconfig`, `workdir`,
    `namespace` and implements `job`, `pods` and `events` (or keeps these, which read
    through the API)."""

    api: kubernetes.client.ApiClient | None
    kubeconfig: pathlib.Path
    workdir: pathlib.Path
    namespace: str

    @property
    def client(self) -> kubernetes.client.ApiClient:
        """The started cluster's API client."""
        if self.api is None:
            raise RuntimeError("the cluster is not started")
        return self.api

    @property
    def core(self) -> kubernetes.client.CoreV1Api:
        return kubernetes.client.CoreV1Api(self.api)

    @property
    def custom(self) -> kubernetes.client.CustomObjectsApi:
        return kubernetes.client.CustomObjectsApi(self.api)

    def apply_crd(self) -> None:
        body = yaml.safe_load(CRD_PATH.read_text())
        ext = kubernetes.client.ApiextensionsV1Api(self.api)
        try:
            ext.create_custom_resource_definition(body)
        except kubernetes.client.ApiException as exc:
            if exc.status != 409:
                raise
        # The group is served once discovery lists it (kubectl and kopf both look there).
        wait_until(
            lambda: any(g.name == names.GROUP for g in kubernetes.client.ApisApi(self.api).get_api_versions().groups),
            60,
            "the DDPJob CRD is not served",
        )

    def create_job(self, body: dict[str, Any]) -> dict[str, Any]:
        ns = body["metadata"].get("namespace", self.namespace)
        return json_object(
            self.custom.create_namespaced_custom_object(names.GROUP, names.VERSION, ns, names.PLURAL, body)
        )

    def status(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        return (self.job(name, namespace) or {}).get("status") or {}

    def wait_phase(self, name: str, phase: str, timeout: float = 180, **fields: Any) -> dict[str, Any]:
        """Wait for `phase` (and fields); fail at once if the job finishes otherwise."""
        finished = {"Succeeded", "Failed"} - {phase}

        def check() -> dict[str, Any] | None:
            st = self.status(name)
            if st.get("phase") in finished:
                raise Abort(f"{name} ended {st.get('phase')} while waiting for {phase}: {st}")
            return st if st.get("phase") == phase and all(st.get(k) == v for k, v in fields.items()) else None

        return wait_until(
            check, timeout, f"{name} did not reach {phase} {fields or ''}", lambda: f"status {self.status(name)}"
        )

    def job(self, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        return get_job(self.custom, namespace or self.namespace, name)

    def pods(self, job: str | None = None, namespace: str | None = None) -> list[dict[str, Any]]:
        selector = f"{names.LABEL_JOB_NAME}={job}" if job is not None else None
        listing = self.core.list_namespaced_pod(namespace or self.namespace, label_selector=selector)
        pods = self.client.sanitize_for_serialization(listing)["items"]
        return sorted(pods, key=lambda p: p["metadata"]["name"])

    def events(self, name: str, namespace: str | None = None) -> list[dict[str, Any]]:
        listing = self.core.list_namespaced_event(
            namespace or self.namespace, field_selector=f"involvedObject.name={name}"
        )
        return self.client.sanitize_for_serialization(listing)["items"]

    @staticmethod
    def kubectl_path() -> str:
        """kubectl as `ddpjob` finds it (cluster/kubectl.py): PATH, then beside this Python."""
        exe = kubectl.locate()
        if exe is None:
            raise FileNotFoundError("kubectl is not installed (the test extra ships it in .venv/bin)")
        return exe

    def kubectl(self, *args: str, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [
            self.kubectl_path(),
            f"--kubeconfig={self.kubeconfig}",
            f"--cache-dir={self.workdir / 'kube-cache'}",
            *args,
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
        return done


def wait_until(predicate: Any, timeout: float, message: str, describe: Any = None, interval: float = 0.05) -> Any:
    return wait_for(predicate, timeout=timeout, interval=interval, message=message, describe=describe)


def read_metrics(path: pathlib.Path) -> list[dict[str, Any]]:
    """The trainer's JSON-lines metrics; a line being written is not a record yet."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(ValueError):
            records.append(json.loads(line))
    return records


def load_example() -> dict[str, Any]:
    return yaml.safe_load(EXAMPLE.read_text())


def elapsed(since: float) -> float:
    return round(time.time() - since, 3)
