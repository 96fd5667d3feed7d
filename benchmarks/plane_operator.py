"""The operator on the real control plane, as the benchmarks beside it run it, and what
they do around it through the HTTP API. A helper of the benchmark scripts beside it (no
measurement of its own: `make bench` running it does nothing).

- `operator_plane`: upstream kube-apiserver, etcd, controller manager and scheduler
  (`make control-plane`), the operator installed from the chart and acting as its
  ServiceAccount, in a process of its own (its RSS and CPU time are its own); its API
  writes read from the server's audit log; optionally behind a fault proxy
  (`scenarios/fault_proxy.py`). No Nodes by default: Pods stay Pending, which is enough
  where their existence is timed, and the script writes their status as a kubelet would.
- `Tracker`: Pods made per job, each job's phase, Events per job, followed with watches.
- `kubelet`: Pod statuses written as a kubelet writes them (`pods/status`, as the admin).
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import json
import os
import pathlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import kubernetes
import yaml

from ddpjob.api import names
from ddpjob_devcluster.clusters.client import OperatorProcess, wait_until
from ddpjob_devcluster.clusters.real import RealCluster
from ddpjob_devcluster.controlplane.controlplane import ControlPlane
from ddpjob_devcluster.controlplane.node import NodeShape
from ddpjob_devcluster.scenarios.chaos import Chaos
from ddpjob_devcluster.scenarios.fault_proxy import FaultProxy, point_kubeconfig_at

ROOT = pathlib.Path(__file__).resolve().parents[1]
NS = "bench"
WRITES = ("create", "update", "patch", "delete")
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata", "verbs": list(WRITES)}, {"level": "None"}],
}


def ddpjob(name: str, nodes: int, namespace: str = NS, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{names.GROUP}/{names.VERSION}",
        "kind": "DDPJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"nodes": nodes, "image": "ddpjob/trainer:bench", "restartBackoffSeconds": 0, **spec},
    }


def wait(predicate, timeout: float, interval: float = 0.005) -> float:
    """Poll `predicate` until it holds; the time it did (perf_counter)."""
    start = time.perf_counter()
    while not predicate():
        if time.perf_counter() - start > timeout:
            raise TimeoutError("benchmark condition not met")
        time.sleep(interval)
    return time.perf_counter()


@dataclasses.dataclass
class Bench:
    """A started `operator_plane`: the cluster (its admin client), the operator process,
    the fault proxy in front of the operator (if any)."""

    cluster: RealCluster
    operator: OperatorProcess
    audit: pathlib.Path
    user: str
    proxy: FaultProxy | None = None
    offset: int = 0

    @property
    def api(self) -> kubernetes.client.ApiClient:
        return self.cluster.client

    @property
    def pid(self) -> int:
        assert self.operator.pid is not None, "the operator is started"
        return self.operator.pid

    def mark(self) -> None:
        """`writes()` counts from here on."""
        self.offset = self.audit.stat().st_size if self.audit.exists() else 0

    def writes(self) -> list[str]:
        """The operator's API writes since `mark()`, as "verb resource[/subresource]", with
        the status code where it was refused: the audit log has the server's view, and
        the operator's user alone (the script's creates and pods/status are the admin's)."""
        out = []
        with open(self.audit) as f:
            f.seek(self.offset)
            for line in f:
                if not line.endswith("\n"):
                    break  # the server is still writing this one
                entry = json.loads(line)
                ref = entry.get("objectRef") or {}
                if entry.get("stage") != "ResponseComplete" or entry["user"].get("username") != self.user:
                    continue
                if entry["verb"] in WRITES and ref.get("resource"):
                    code = (entry.get("responseStatus") or {}).get("code", 200)
                    out.append(
                        f"{entry['verb']} {ref['resource']}"
                        f"{'/' + ref['subresource'] if ref.get('subresource') else ''}"
                        f"{f' ({code})' if code >= 300 else ''}"
                    )
        return out


@contextlib.contextmanager
def operator_plane(
    tmp: pathlib.Path,
    namespace: str = NS,
    *,
    env: dict[str, str] | None = None,
    prelude: str = "",
    faults: Chaos | None = None,
    nodes: tuple[NodeShape, ...] = (),
) -> Iterator[Bench]:
    """A control plane of its own with the operator of the chart watching `namespace`.
    env: added to the operator's environment; prelude: Python run in the operator's
    process before the CLI (another transport); faults: a fault proxy between the
    operator and kube-apiserver (`Bench.proxy`; its `chaos` may be swapped at any time).
    OPERATOR_LOG in this environment names the operator's log file."""
    policy, audit = tmp / "audit-policy.yaml", tmp / "audit.log"
    policy.write_text(yaml.safe_dump(AUDIT_POLICY))
    plane = ControlPlane(
        tmp / "plane",
        api_server_args=[f"--audit-policy-file={policy}", f"--audit-log-path={audit}", "--audit-log-maxsize=0"],
    )
    with plane:
        cluster = RealCluster(tmp / "cluster", plane=plane, namespace=namespace, nodes=nodes).start(operator=False)
        proxy = None
        try:
            operator, deploy = cluster.operator, cluster.deployment
            assert operator is not None and deploy is not None and operator.command is not None  # made by start()
            if faults is not None:
                proxy = FaultProxy(plane.server, plane.ca, faults).start()
                point_kubeconfig_at(operator.kubeconfig, proxy.url)  # the token goes through it
            operator.env = {**(operator.env or os.environ), **(env or {})}
            if prelude:
                cli = "import sys; from ddpjob.cli import main; sys.exit(main())"
                operator.command = [sys.executable, "-c", prelude + cli, *operator.command[1:]]
            if os.environ.get("OPERATOR_LOG"):
                operator.log_path = pathlib.Path(os.environ["OPERATOR_LOG"])
            operator.start()
            user = f"system:serviceaccount:{deploy.namespace}:{deploy.service_account}"
            yield Bench(cluster, operator, audit, user, proxy)
        finally:
            cluster.stop()
            if proxy is not None:
                proxy.stop()


def make_namespace(core: kubernetes.client.CoreV1Api, name: str) -> None:
    """A namespace that takes Pods: the ServiceAccount admission plugin refuses them until
    the ServiceAccount controller has made the namespace's `default` account."""
    with contextlib.suppress(kubernetes.client.ApiException):
        core.create_namespace({"metadata": {"name": name}})  # type: ignore[arg-type]  # a dict body: the client sends it as it is
    wait_until(lambda: core.list_namespaced_service_account(name).items, 60, f"no ServiceAccount in {name}")


class Tracker:
    """Pods ever made per job (`count`), each job's phase (`phase`) and Events per job
    (`events`) in one namespace, from watches through the HTTP API: each resumed from
    its last resourceVersion, listed again after an error (an object seen twice is
    counted once, by uid). `kinds` picks the watches ("pods", "jobs", "events")."""

    def __init__(self, api: kubernetes.client.ApiClient, namespace: str = NS, kinds=("pods", "jobs", "events")):
        core, custom = kubernetes.client.CoreV1Api(api), kubernetes.client.CustomObjectsApi(api)
        lists = {
            "pods": (core.list_namespaced_pod, (namespace,)),
            "jobs": (custom.list_namespaced_custom_object, (names.GROUP, names.VERSION, namespace, names.PLURAL)),
            "events": (core.list_namespaced_event, (namespace,)),
        }
        self.pods: collections.Counter = collections.Counter()  # job -> Pods ever created
        self.phase: dict[str, str | None] = {}  # job -> status.phase
        self.events: collections.Counter = collections.Counter()  # job -> Events posted
        self.seen: set[str] = set()
        self.lock, self.stop = threading.Lock(), threading.Event()
        for kind in kinds:
            threading.Thread(target=self._follow, args=(kind, *lists[kind]), daemon=True).start()

    def _follow(self, kind: str, list_fn: Any, args: tuple) -> None:
        version = None
        while not self.stop.is_set():
            try:
                # Plain dicts (deserialize=False): the client's models cost ~1 ms per Pod event.
                for event in kubernetes.watch.Watch().stream(
                    list_fn, *args, resource_version=version, timeout_seconds=30, deserialize=False
                ):
                    obj = event["object"]
                    version = obj["metadata"]["resourceVersion"]
                    self._take(kind, event["type"], obj)
                    if self.stop.is_set():
                        return
            except Exception:  # noqa: BLE001 - an expired resourceVersion or a dropped stream: list again
                version = None
                self.stop.wait(0.2)

    def _take(self, kind: str, verb: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        with self.lock:
            if kind == "jobs":
                if verb != "DELETED":
                    self.phase[meta["name"]] = (obj.get("status") or {}).get("phase")
            elif verb == "ADDED" and meta["uid"] not in self.seen:
                self.seen.add(meta["uid"])
                if kind == "pods":
                    self.pods[(meta.get("labels") or {}).get(names.LABEL_JOB_NAME)] += 1
                else:
                    self.events[obj["involvedObject"]["name"]] += 1

    def count(self, *jobs: str) -> int:
        with self.lock:
            return sum(self.pods[j] for j in jobs)

    def event_count(self, *jobs: str) -> int:
        with self.lock:
            return sum(self.events[j] for j in jobs)

    def phases(self, prefix: str) -> collections.Counter:
        with self.lock:
            return collections.Counter(p for n, p in self.phase.items() if n.startswith(prefix))


def kubelet(core: kubernetes.client.CoreV1Api, pods: list[str], phase: str, namespace: str = NS, **status: Any) -> None:
    """Report `phase` for every Pod in `pods` as the kubelet would (pods/status, 16 in
    flight); `status`: more fields (a Pod IP)."""
    state = {
        "Running": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
        "Succeeded": {
            "terminated": {
                "exitCode": 0,
                "reason": "Completed",
                "startedAt": "2026-01-01T00:00:00Z",
                "finishedAt": "2026-01-01T00:00:01Z",
            }
        },
    }[phase]
    container = {
        "name": "trainer",
        "image": "ddpjob/trainer:bench",
        "imageID": "",
        "ready": phase == "Running",
        "restartCount": 0,
        "state": state,
    }
    body = {"status": {"phase": phase, "containerStatuses": [container], **status}}
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda p: core.patch_namespaced_pod_status(p, namespace, body), pods))
