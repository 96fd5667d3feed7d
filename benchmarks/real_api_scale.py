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

from bare_client import CEILING_CLIENT_REAL, api_config, ceiling_pod  # scripts: their folder is on the path
from process_stats import rss_peak_mb
from scale_backends import emulator_backend, real_backend

NS = "bench"


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
    with tempfile.TemporaryDirectory() as tmp, backend(pathlib.Path(tmp), NS) as (api, operator, writes, mark):
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
