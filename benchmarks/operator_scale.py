"""How the operator scales on the real control plane (benchmarks/plane_operator.py:
kube-apiserver, etcd, controller manager and scheduler, no Nodes, the operator installed
from the chart and acting as its ServiceAccount, in its own process, so its peak RSS
and CPU time are its own). Everything goes through the HTTP API: watches follow the
Pods, phases and Events; the operator's writes are read from the server's audit log.

1. Latency from DDPJob creation (an HTTP create with the official client) to all N = 8
   Pods existing, one job at a time, 50 jobs: p50 / p99 (goals 0.5 s / 2 s).
2. 1,000 DDPJobs x 4 Pods created at once (HTTP creates, 16 in flight): time until
   all 4,000 Pods exist, and the operator's peak RSS (VmHWM; goal 300 MB).
3. The same 1,000 jobs driven to Succeeded (the script plays the kubelet through the
   pods/status subresource): API write requests per job over its whole life, counted in
   the audit log (goal N + 10 = 14). The kubelet's writes and the job creates are not
   the operator's and are not counted.
4. A large gang: one DDPJob of 1,024 nodes created (HTTP), time until all its Pods exist
   (p50 over --large-runs, each started on an idle operator; goal 2 s), its write count
   to Succeeded (goal N + 10; the operator's Lease renewals in that time counted apart),
   and in the same run the server's own ceiling: 1,024 Pods of the operator's rendering
   (the same size) created by a client alone, in a process of its own (kubernetes_asyncio,
   64 requests in flight, like the operator), in a namespace the operator does not watch.

`--client threads` runs the operator's API calls on the synchronous official client in a
thread pool (benchmarks/kube_threads.py) instead of the operator's own transport.

Each part also prints the operator process's CPU time (user + system, /proc): on a busy
machine the wall-clock figures follow the load, what the operator itself spent does far
less. To compare two trees, run this one script with each tree's Python (it imports
`ddpjob` from the interpreter's environment), alternating, in one sitting.

    .venv/bin/python benchmarks/operator_scale.py [--jobs 1000] [--latency-jobs 50] [--client asyncio|threads]
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import kubernetes

from bare_client import CEILING_CLIENT, api_config, ceiling_pod  # scripts: their folder is on the path
from plane_operator import NS, ROOT, Bench, Tracker, ddpjob, kubelet, make_namespace, operator_plane, wait
from process_stats import cpu_seconds, rss_peak_mb, wait_idle

CEILING_NS = "bench-ceiling"  # not watched by the operator (it serves NS only)


def create_jobs(custom: Any, jobs: list[str], nodes: int) -> None:
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(
            pool.map(
                lambda n: custom.create_namespaced_custom_object(
                    "ddpjob.io", "v1alpha1", NS, "ddpjobs", ddpjob(n, nodes)
                ),
                jobs,
            )
        )


def by_kind(writes: list[str], jobs: int) -> str:
    return ", ".join(f"{k} {v / jobs:.2f}" for k, v in sorted(collections.Counter(writes).items()))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--latency-jobs", type=int, default=50)
    parser.add_argument("--latency-nodes", type=int, default=8)
    parser.add_argument("--large-nodes", type=int, default=1024)
    parser.add_argument("--large-runs", type=int, default=3)
    parser.add_argument("--client", choices=("asyncio", "threads"), default="asyncio")
    args = parser.parse_args()
    # The operator process finds kube_threads.py through PYTHONPATH.
    threads = args.client == "threads"
    with (
        tempfile.TemporaryDirectory() as tmp,
        operator_plane(
            pathlib.Path(tmp),
            env={"PYTHONPATH": str(ROOT / "benchmarks")} if threads else None,
            prelude="import kube_threads; kube_threads.install(); " if threads else "",
        ) as bench,
    ):
        custom = kubernetes.client.CustomObjectsApi(bench.api)
        track = Tracker(bench.api)
        # Ready when a first job gets its Pods.
        custom.create_namespaced_custom_object("ddpjob.io", "v1alpha1", NS, "ddpjobs", ddpjob("warmup", 1))
        wait(lambda: track.count("warmup") == 1, timeout=120, interval=0.05)
        # The operator's own CPU time per part: what it spent, whatever else the machine ran.
        cpu = [cpu_seconds(bench.pid)]

        # ---- 1. creation -> all N Pods, one job at a time ----
        latencies = []
        for i in range(args.latency_jobs):
            name = f"lat-{i}"
            start = time.perf_counter()
            custom.create_namespaced_custom_object(
                "ddpjob.io", "v1alpha1", NS, "ddpjobs", ddpjob(name, args.latency_nodes)
            )
            done = wait(lambda: track.count(name) == args.latency_nodes, timeout=60, interval=0.002)  # noqa: B023 - the wait calls it before the loop moves on
            latencies.append(done - start)
        latencies.sort()
        p50 = statistics.median(latencies)
        p99 = latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))]
        print(
            f"creation -> all {args.latency_nodes} Pods, {args.latency_jobs} jobs one at a time: "
            f"p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms"
        )

        print(f"API client: {args.client}")
        cpu.append(cpu_seconds(bench.pid))
        if args.large_runs:
            large_gang(bench, track, args.large_nodes, args.large_runs)
        cpu.append(cpu_seconds(bench.pid))

        # ---- 2. a burst of jobs ----
        bench.mark()
        burst = [f"burst-{i}" for i in range(args.jobs)]
        start = time.perf_counter()
        create_jobs(custom, burst, args.nodes)
        created = time.perf_counter()
        done = wait(lambda: track.count(*burst) == args.jobs * args.nodes, timeout=1200, interval=0.02)
        print(
            f"{args.jobs} DDPJobs x {args.nodes} Pods created at once ({created - start:.2f} s to create): "
            f"all {args.jobs * args.nodes} Pods exist after {done - start:.1f} s"
        )

        # ---- 3. drive them to Succeeded, count the operator's writes ----
        all_pods = [f"{n}-{r}" for n in burst for r in range(args.nodes)]
        core = kubernetes.client.CoreV1Api(bench.api)
        kubelet(core, all_pods, "Running")
        wait(lambda: track.phases("burst-")["Running"] == args.jobs, timeout=600, interval=0.2)
        kubelet(core, all_pods, "Succeeded")
        wait(lambda: track.phases("burst-")["Succeeded"] == args.jobs, timeout=600, interval=0.2)
        finished = time.perf_counter()
        # kopf posts Events in the background: wait for three per job (Created, Running,
        # Succeeded), or until none came for 3 s.
        last, quiet_since = -1, time.perf_counter()
        while time.perf_counter() - quiet_since < 3:
            count = track.event_count(*burst)
            if count >= 3 * args.jobs:
                break
            if count != last:
                last, quiet_since = count, time.perf_counter()
            time.sleep(0.2)
        peak = rss_peak_mb(bench.pid)
        cpu.append(cpu_seconds(bench.pid))
        print(
            f"operator CPU time: {cpu[1] - cpu[0]:.2f} s for the {args.latency_jobs} one-at-a-time jobs, "
            f"{cpu[2] - cpu[1]:.2f} s for the {args.large_nodes}-node job(s), "
            f"{cpu[3] - cpu[2]:.2f} s for the {args.jobs}-job burst to Succeeded"
        )
        print(f"all {args.jobs} jobs Succeeded {finished - done:.1f} s after their Pods existed")
        print(f"operator peak RSS (VmHWM): {peak:.0f} MB")
        writes = bench.writes()
        print(
            f"API writes per job to Succeeded: {len(writes) / args.jobs:.2f} "
            f"(goal <= {args.nodes + 10}); per job: {by_kind(writes, args.jobs)}"
        )
        track.stop.set()


LEASE_RENEWAL = "update leases"


def large_gang(bench: Bench, track: Tracker, nodes: int, runs: int) -> None:
    """4. One job of `nodes` Pods, `runs` times, each on an idle operator; then the
    server's own create ceiling."""
    custom, core = kubernetes.client.CustomObjectsApi(bench.api), kubernetes.client.CoreV1Api(bench.api)
    times, writes = [], []
    for run in range(runs):
        name = f"large-{run}"
        wait_idle(bench.pid)
        bench.mark()
        start = time.perf_counter()
        custom.create_namespaced_custom_object("ddpjob.io", "v1alpha1", NS, "ddpjobs", ddpjob(name, nodes))
        done = wait(lambda: track.count(name) == nodes, timeout=300, interval=0.005)  # noqa: B023 - the wait calls it before the loop moves on
        times.append(done - start)
        pods = [f"{name}-{r}" for r in range(nodes)]
        kubelet(core, pods, "Running")
        wait(lambda: track.phase.get(name) == "Running", timeout=300, interval=0.05)  # noqa: B023 - the wait calls it before the loop moves on
        kubelet(core, pods, "Succeeded")
        wait(lambda: track.phase.get(name) == "Succeeded", timeout=300, interval=0.05)  # noqa: B023 - the wait calls it before the loop moves on
        time.sleep(1.0)  # Events are posted in the background
        made = bench.writes()
        kinds = collections.Counter(made)
        # The operator's Lease renewals (leader election, one per retry period whatever the
        # jobs) are its writes but not the job's: counted apart.
        writes.append((len(made) - kinds[LEASE_RENEWAL], kinds[LEASE_RENEWAL]))
        custom.delete_namespaced_custom_object("ddpjob.io", "v1alpha1", NS, "ddpjobs", name)
        # The garbage collector deletes the Pods (unscheduled: at once, no kubelet to wait for).
        selector = f"ddpjob.io/job-name={name}"
        wait(lambda: not core.list_namespaced_pod(NS, label_selector=selector, limit=1).items, 300, 0.2)  # noqa: B023 - the wait calls it before the loop moves on
    times.sort()
    print(
        f"{nodes}-node job: creation -> all Pods exist, {runs} runs: p50 {statistics.median(times):.2f} s "
        f"(runs {', '.join(f'{t:.2f}' for t in times)}); goal <= 2 s"
    )
    print(
        f"{nodes}-node job: API writes to Succeeded: {', '.join(str(job) for job, _ in writes)} "
        f"(goal <= {nodes + 10}); "
        f"the operator's Lease renewals beside them: {', '.join(str(lease) for _, lease in writes)}"
    )
    # Which writes, in the last run: the goal's N + 10 is the Pods plus a fixed few.
    print(f"{nodes}-node job: its writes by kind, last run: " + ", ".join(f"{k} {n}" for k, n in kinds.most_common()))

    # The server's ceiling: the same number of Pod creates from a client process of its
    # own (kubernetes_asyncio, 64 in flight, the operator's limit), in a namespace the
    # operator does not watch, so that the server does nothing else but serve them.
    make_namespace(core, CEILING_NS)
    out = subprocess.run(
        [sys.executable, "-c", CEILING_CLIENT, json.dumps(api_config(bench.api)), CEILING_NS, str(nodes)],
        input=json.dumps(ceiling_pod(ddpjob("ceiling", nodes), CEILING_NS)),
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    took = float(out.split()[-1])  # timed by the client: its imports and start excluded
    print(
        f"the API server alone: {nodes} Pod creates (kubernetes_asyncio in its own process, 64 in flight) in "
        f"{took:.2f} s ({nodes / took:.0f} Pods/s)"
    )
    core.delete_collection_namespaced_pod(CEILING_NS, label_selector="bench=ceiling")


if __name__ == "__main__":
    main()
