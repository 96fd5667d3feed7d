"""The operator on the real API server, in one run, through the HTTP API (a Pod watch
counts the Pods of each job; nothing reads the server's internals):

1. creation (an HTTP create) -> all 8 Pods exist, one job at a time, 50 jobs: p50 / p99;
2. one 1,024-node job: creation -> all 1,024 Pods exist, and the same server's ceiling:
   a bare client (kubernetes_asyncio, 64 in flight, in a process of its own) creating
   1,024 Pods of the same rendering; the ratio operator / bare client (goal <= 1.3);
3. 1,000 jobs x 4 Pods created at once: time until all 4,000 Pods exist;
4. the operator's API writes per job of the latency jobs, driven to Succeeded by this
   script playing the kubelet (pods/status): counted from the server's audit log (the
   operator's ServiceAccount);
5. the operator's peak RSS (VmHWM).

Upstream kube-apiserver/etcd/controller manager/scheduler (`make control-plane`), no
Nodes (Pods stay Pending: "exist" is what is timed), the operator installed from the
chart and acting as its ServiceAccount (benchmarks/plane_operator.py).

    .venv/bin/python benchmarks/real_api_scale.py [--jobs 1000] [--latency-jobs 50] [--large-nodes 1024]
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, cast

import kubernetes

from bare_client import CEILING_CLIENT, api_config, ceiling_pod  # scripts: their folder is on the path
from plane_operator import NS, Tracker, ddpjob, kubelet, make_namespace, operator_plane, wait
from process_stats import rss_peak_mb


def measure(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp, operator_plane(pathlib.Path(tmp)) as bench:
        api = bench.api
        custom, core = kubernetes.client.CustomObjectsApi(api), kubernetes.client.CoreV1Api(api)
        pods = Tracker(api, kinds=("pods",))
        custom.create_namespaced_custom_object("ddpjob.io", "v1alpha1", NS, "ddpjobs", ddpjob("warmup", 1))
        wait(lambda: pods.count("warmup") == 1, 120, 0.05)

        bench.mark()
        latencies = []
        for i in range(args.latency_jobs):
            job, start = f"lat-{i}", time.perf_counter()
            custom.create_namespaced_custom_object("ddpjob.io", "v1alpha1", NS, "ddpjobs", ddpjob(job, 8))
            latencies.append(wait(lambda: pods.count(job) == 8, 60) - start)  # noqa: B023 - the wait calls it before the loop moves on
        latencies.sort()
        out["p50_ms"] = statistics.median(latencies) * 1000
        out["p99_ms"] = latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))] * 1000
        names = [f"lat-{i}-{r}" for i in range(args.latency_jobs) for r in range(8)]
        kubelet(core, names, "Running")
        kubelet(core, names, "Succeeded")
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
        counted = bench.writes()
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
        make_namespace(core, ceiling_ns)
        pod = ceiling_pod(ddpjob("ceiling", args.large_nodes), ceiling_ns)
        done = subprocess.run(
            [sys.executable, "-c", CEILING_CLIENT, json.dumps(api_config(api)), ceiling_ns, str(args.large_nodes)],
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
        out["rss_mb"] = rss_peak_mb(bench.pid)
        pods.stop.set()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--latency-jobs", type=int, default=50)
    parser.add_argument("--large-nodes", type=int, default=1024)
    parser.add_argument("--large-runs", type=int, default=1)
    args = parser.parse_args()
    row = measure(args)
    print(f"load average: {os.getloadavg()}")
    print(json.dumps(row))
    print("| measure | real API server |")
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
        print(f"| {label} | {row[key]:.2f} |")


if __name__ == "__main__":
    main()
