"""The operator on the real API server, side by side with the emulator, in one run.

For each backend, the same measures through the same HTTP API (a Pod watch counts the
Pods of each job; nothing reads a backend's internals):

1. creation (an HTTP create) -> all 8 Pods exist, one job at a time, 50 jobs: p50 / p99;
2. one 1,024-node job: creation -> all 1,024 Pods exist, and the same server's ceiling:
   a bare client (kubernetes_asyncio, 64 in flight, in a process of its own) creating
   1,024 Pods of the same rendering; the ratio operator / bare client (goal <= 1.3);
3. 1,000 jobs x 4 Pods created at once: time until all 4,000 Pods exist;
4. the operator's API writes per job of the latency jobs, driven to Succeeded by this
   script playing the kubelet (pods/status): counted from the real server's audit log
   (the operator's ServiceAccount) and from the emulator's request log;
5. the operator's peak RSS (VmHWM).

The real backend: upstream kube-apiserver/etcd/controller manager/scheduler
(`make control-plane`), no Nodes (Pods stay Pending: "exist" is what is timed), the
operator installed from the chart and acting as its ServiceAccount. The emulator: the
operator process against `KubeEmulator` with the CRD applied.

    .venv/bin/python benchmarks/real_api_scale.py [--jobs 1000] [--latency-jobs 50] [--large-nodes 1024]
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import contextlib
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, cast

import kubernetes
import yaml

from ddpjob_devcluster.apiserver.emulator import KubeEmulator
from ddpjob_devcluster.clusters.client import OperatorProcess
from ddpjob_devcluster.clusters.real import RealCluster
from ddpjob_devcluster.controlplane.controlplane import ControlPlane

ROOT = pathlib.Path(__file__).resolve().parents[1]
from bare_client import ceiling_pod  # scripts: their folder is on the path  # noqa: E402
from process_stats import rss_peak_mb  # noqa: E402

NS = "bench"
WRITES = ("create", "update", "patch", "delete")
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata", "verbs": list(WRITES)}, {"level": "None"}],
}


def ddpjob(name: str, nodes: int) -> dict[str, Any]:
    return {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"nodes": nodes, "image": "ddpjob/trainer:bench", "restartBackoffSeconds": 0},
    }


class PodCounter:
    """Pods ever added, per job, from one watch on the namespace (re-listed on errors)."""

    def __init__(self, api: kubernetes.client.ApiClient, namespace: str = NS):
        self.core, self.namespace = kubernetes.client.CoreV1Api(api), namespace
        self.added: collections.Counter = collections.Counter()
        self.seen: set[str] = set()
        self.stop = threading.Event()
        self.lock = threading.Lock()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self.stop.is_set():
            with contextlib.suppress(Exception):
                for event in kubernetes.watch.Watch().stream(
                    self.core.list_namespaced_pod, self.namespace, timeout_seconds=30, _request_timeout=60
                ):
                    pod = event["object"]
                    if event["type"] == "ADDED" and pod.metadata.uid not in self.seen:
                        with self.lock:
                            self.seen.add(pod.metadata.uid)
                            self.added[(pod.metadata.labels or {}).get("ddpjob.io/job-name")] += 1
                    if self.stop.is_set():
                        return

    def count(self, *jobs: str) -> int:
        with self.lock:
            return sum(self.added[j] for j in jobs)


def wait(predicate, timeout: float, interval: float = 0.005) -> float:
    start = time.perf_counter()
    while not predicate():
        if time.perf_counter() - start > timeout:
            raise TimeoutError("benchmark condition not met")
        time.sleep(interval)
    return time.perf_counter()


@contextlib.contextmanager
def emulator_backend(tmp: pathlib.Path):
    with KubeEmulator() as emu:
        kubeconfig = emu.write_kubeconfig(tmp / "kubeconfig", namespace=NS)
        api = kubernetes.config.new_client_from_config(str(kubeconfig))
        crd = yaml.safe_load((ROOT / "manifests/crd/ddpjobs.ddpjob.io.yaml").read_text())
        kubernetes.client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
        kubernetes.client.CoreV1Api(api).create_namespace({"metadata": {"name": NS}})  # type: ignore[arg-type]  # a dict body: the client sends it as it is
        operator = OperatorProcess(kubeconfig, tmp / "operator.log", NS).start()
        first = [0]

        def writes() -> list[str]:
            return [
                f"{r.verb} {r.resource}{'/' + r.subresource if r.subresource else ''}"
                for r in emu.requests[first[0] :]
                if r.verb in WRITES
                and r.namespace == NS
                and not (r.resource == "pods" and r.subresource == "status")
                and not (r.resource == "ddpjobs" and r.verb == "create")
            ]

        def mark() -> None:
            first[0] = len(emu.requests)

        try:
            yield api, operator, writes, mark
        finally:
            operator.stop()
            api.close()


@contextlib.contextmanager
def real_backend(tmp: pathlib.Path):
    policy, audit = tmp / "audit-policy.yaml", tmp / "audit.log"
    policy.write_text(yaml.safe_dump(AUDIT_POLICY))
    plane = ControlPlane(
        tmp / "plane",
        api_server_args=[f"--audit-policy-file={policy}", f"--audit-log-path={audit}", "--audit-log-maxsize=0"],
    )
    with plane:
        cluster = RealCluster(tmp / "cluster", plane=plane, namespace=NS, nodes=()).start()
        user = f"system:serviceaccount:{NS}:ddpjob-ddpjob-operator"
        offset = [0]

        def writes() -> list[str]:
            out = []
            with open(audit) as f:
                f.seek(offset[0])
                for line in f:
                    entry = json.loads(line)
                    ref = entry.get("objectRef") or {}
                    if entry.get("stage") != "ResponseComplete" or entry["user"].get("username") != user:
                        continue
                    if entry["verb"] in WRITES and ref.get("resource"):
                        code = (entry.get("responseStatus") or {}).get("code", 200)
                        out.append(
                            f"{entry['verb']} {ref['resource']}"
                            f"{'/' + ref['subresource'] if ref.get('subresource') else ''}"
                            f"{f' ({code})' if code >= 300 else ''}"
                        )
            return out

        def mark() -> None:
            offset[0] = audit.stat().st_size if audit.exists() else 0

        try:
            yield cluster.api, cluster.operator, writes, mark
        finally:
            cluster.stop()


def play_kubelet(core: kubernetes.client.CoreV1Api, pods: list[str], phase: str) -> None:
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
    body = {
        "status": {
            "phase": phase,
            "containerStatuses": [
                {
                    "name": "trainer",
                    "image": "ddpjob/trainer:bench",
                    "imageID": "",
                    "ready": phase == "Running",
                    "restartCount": 0,
                    "state": state,
                }
            ],
        }
    }
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda p: core.patch_namespaced_pod_status(p, NS, body), pods))


def measure(name: str, backend, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"backend": name}
    with tempfile.TemporaryDirectory() as tmp, backend(pathlib.Path(tmp)) as (api, operator, writes, mark):
        custom, core = kubernetes.client.CustomObjectsApi(api), kubernetes.client.CoreV1Api(api)
        pods = PodCounter(api)
        custom.create_namespaced_custom_object("ddpjob.io", "v1alpha1", NS, "ddpjobs", ddpjob("warmup", 1))
        wait(lambda: pods.count("warmup") == 1, 120, 0.05)

        mark()
        latencies = []
        for i in range(args.latency_jobs):
            job, start = f"lat-{i}", time.perf_counter()
            custom.create_namespaced_custom_object("ddpjob.io", "v1alpha1", NS, "ddpjobs", ddpjob(job, 8))
            latencies.append(wait(lambda: pods.count(job) == 8, 60) - start)  # noqa: B023 - the wait calls it before the loop moves on
        latencies.sort()
        out["p50_ms"] = statistics.median(latencies) * 1000
        out["p99_ms"] = latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))] * 1000
        names = [f"lat-{i}-{r}" for i in range(args.latency_jobs) for r in range(8)]
        play_kubelet(core, names, "Running")
        play_kubelet(core, names, "Succeeded")
        wait(
            lambda: all(
                (
                    cast(
                        dict[str, Any],
                        custom.get_namespaced_custom_object("ddpjob.io", "v1alpha1", NS, "ddpjobs", f"lat-{i}"),
                    ).get("status")
                    or {}
                ).get("phase")
                == "Succeeded"
                for i in range(args.latency_jobs)
            ),
            300,
            1,
        )
        time.sleep(3)  # Events go out in the background
        counted = writes()
        out["writes_per_job"] = len(counted) / args.latency_jobs
        out["writes_by_kind"] = {k: v / args.latency_jobs for k, v in sorted(collections.Counter(counted).items())}

        large = []
        for run in range(args.large_runs):
            job, start = f"large-{run}", time.perf_counter()
            custom.create_namespaced_custom_object(
                "ddpjob.io", "v1alpha1", NS, "ddpjobs", ddpjob(job, args.large_nodes)
            )
            large.append(wait(lambda: pods.count(job) == args.large_nodes, 300, 0.01) - start)  # noqa: B023 - the wait calls it before the loop moves on
            custom.delete_namespaced_custom_object("ddpjob.io", "v1alpha1", NS, "ddpjobs", job)
            time.sleep(5)
        out["large_s"] = statistics.median(large)
        ceiling_ns = f"{NS}-ceiling"
        with contextlib.suppress(kubernetes.client.ApiException):
            core.create_namespace({"metadata": {"name": ceiling_ns}})  # type: ignore[arg-type]  # a dict body: the client sends it as it is
        pod = ceiling_pod(ddpjob("ceiling", args.large_nodes), ceiling_ns)
        done = subprocess.run(
            [sys.executable, "-c", CEILING_CLIENT_REAL, json.dumps(api_config(api)), ceiling_ns, str(args.large_nodes)],
            input=json.dumps(pod),
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        out["bare_client_s"] = float(done.split()[-1])
        out["ratio"] = out["large_s"] / out["bare_client_s"]

        burst = [f"burst-{i}" for i in range(args.jobs)]
        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(
                pool.map(
                    lambda n: custom.create_namespaced_custom_object(
                        "ddpjob.io", "v1alpha1", NS, "ddpjobs", ddpjob(n, 4)
                    ),
                    burst,
                )
            )
        out["burst_created_s"] = time.perf_counter() - start
        out["burst_s"] = wait(lambda: pods.count(*burst) == 4 * args.jobs, 1200, 0.2) - start
        out["rss_mb"] = rss_peak_mb(operator.popen.pid)
        pods.stop.set()
    return out


def api_config(api: kubernetes.client.ApiClient) -> dict[str, Any]:
    c = api.configuration
    return {
        "host": c.host,
        "ca": c.ssl_ca_cert,
        "cert": c.cert_file,
        "key": c.key_file,
        "verify": c.verify_ssl,
        "token": (c.api_key or {}).get("authorization") or (c.api_key or {}).get("BearerToken"),
    }


# The bare client: operator_scale's ceiling client, with the server's TLS identity.
CEILING_CLIENT_REAL = """
import asyncio, json, sys, time
import kubernetes_asyncio
conf, ns, count = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
pod = json.loads(sys.stdin.read())
async def main():
    c = kubernetes_asyncio.client.Configuration()
    c.host, c.verify_ssl = conf["host"], conf["verify"]
    c.ssl_ca_cert, c.cert_file, c.key_file = conf["ca"], conf["cert"], conf["key"]
    if conf["token"]:
        c.api_key = {"BearerToken": conf["token"]}; c.api_key_prefix = {"BearerToken": "Bearer"}
    c.connection_pool_maxsize = 64
    async with kubernetes_asyncio.client.ApiClient(c) as api:
        core = kubernetes_asyncio.client.CoreV1Api(api)
        limit = asyncio.Semaphore(64)
        async def one(i):
            async with limit:
                await core.create_namespaced_pod(ns, {**pod, "metadata": {**pod["metadata"], "name": f"ceiling-{i}"}})
        start = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(count)))
        print(time.perf_counter() - start)
asyncio.run(main())
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--latency-jobs", type=int, default=50)
    parser.add_argument("--large-nodes", type=int, default=1024)
    parser.add_argument("--large-runs", type=int, default=1)
    parser.add_argument("--backends", default="real,emulator")
    args = parser.parse_args()
    backends = {"real": real_backend, "emulator": emulator_backend}
    rows = [measure(name, backends[name], args) for name in args.backends.split(",")]
    print(f"load average: {os.getloadavg()}")
    for row in rows:
        print(json.dumps(row))
    print("| measure | " + " | ".join(r["backend"] for r in rows) + " |")
    for key, label in (
        ("p50_ms", "creation -> 8 Pods p50 (ms)"),
        ("p99_ms", "creation -> 8 Pods p99 (ms)"),
        ("large_s", f"{args.large_nodes}-node job -> all Pods (s)"),
        ("bare_client_s", f"bare client, {args.large_nodes} Pods (s)"),
        ("ratio", "operator / bare client"),
        ("burst_s", f"{args.jobs} jobs x 4 Pods -> all exist (s)"),
        ("writes_per_job", "operator writes per job (N = 8)"),
        ("rss_mb", "operator peak RSS (MB)"),
    ):
        print(
            f"| {label} | "
            + " | ".join(f"{r[key]:.2f}" if isinstance(r[key], float) else str(r[key]) for r in rows)
            + " |"
        )


if __name__ == "__main__":
    main()
