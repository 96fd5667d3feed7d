"""How the operator scales against the API emulator (`ddpjob_devcluster.apiserver.emulator`).

The operator runs in its own process (`run_operator`, configured by KUBECONFIG like in a
shell), so its peak RSS is its own; the emulator and this script share another process.

1. Latency from DDPJob creation (an HTTP create with the official client) to all N = 8
   Pods existing, one job at a time, 50 jobs: p50 / p99 (goals 0.5 s / 2 s).
2. 1,000 DDPJobs x 4 Pods created at once (in one burst inside the emulator): time until
   all 4,000 Pods exist, and the operator's peak RSS (VmHWM; goal 300 MB).
3. The same 1,000 jobs driven to Succeeded (the script plays the kubelet through the
   pods/status subresource): API write requests per job over its whole life, counted at
   the emulator (goal N + 10 = 14). The kubelet's writes and the job creates are not
   the operator's and are not counted.
4. A large gang: one DDPJob of 1,024 nodes created (HTTP), time until all its Pods exist
   (p50 over --large-runs, each started on an idle operator; goal 2 s), its write count
   to Succeeded (goal N + 10), and in the same run the emulator's own ceiling: 1,024
   Pods of the operator's rendering (the same size) created by a client alone, in a
   process of its own (kubernetes_asyncio, 64 requests in flight, like the operator),
   in a namespace the operator does not watch.

`--client threads` runs the operator's API calls on the synchronous official client in a
thread pool (benchmarks/kube_threads.py) instead of `kubernetes_asyncio`.

Each part also prints the operator process's CPU time (user + system, /proc): on a busy
machine the wall-clock figures follow the load, what the operator itself spent does far
less. To compare two trees, run this one script with each tree's Python (it imports
`ddpjob` from the interpreter's environment), alternating, in one sitting.

    .venv/bin/python benchmarks/operator_scale.py [--jobs 1000] [--latency-jobs 50] [--client asyncio|threads]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import kubernetes

from bare_client import CEILING_CLIENT, ceiling_pod  # scripts: their folder is on the path
from ddpjob import gc_tuning
from ddpjob_devcluster.apiserver.emulator import KubeEmulator
from emulated_operator import JOBS, NS, ROOT, Tracker, crd_client, ddpjob, in_emulator, kubelet, start_operator
from process_stats import cpu_seconds, rss_peak_mb, wait_idle

CEILING_NS = "bench-ceiling"  # not watched by the operator (it serves NS only)


def wait(predicate, timeout: float, interval: float = 0.002) -> float:
    start = time.perf_counter()
    while not predicate():
        if time.perf_counter() - start > timeout:
            raise TimeoutError("benchmark condition not met")
        time.sleep(interval)
    return time.perf_counter()


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
    # This process is the emulator's: tuned as the dev cluster's own process is (demo/main.py).
    gc_tuning.tune_for_long_running_server()
    # The operator process finds kube_threads.py through PYTHONPATH (set below).
    install = "import kube_threads; kube_threads.install(); " if args.client == "threads" else ""

    with KubeEmulator() as emu, tempfile.TemporaryDirectory() as tmp:
        kubeconfig, api = crd_client(emu, pathlib.Path(tmp))
        custom = kubernetes.client.CustomObjectsApi(api)
        proc = start_operator(
            kubeconfig,
            os.environ.get("OPERATOR_LOG") or pathlib.Path(tmp) / "operator.log",
            {"PYTHONPATH": str(ROOT / "benchmarks")} if install else None,
            install,
        )
        try:
            # Ready when a first job gets its Pods.
            custom.create_namespaced_custom_object("ddpjob.io", "v1alpha1", NS, "ddpjobs", ddpjob("warmup", 1))
            track = Tracker(emu)
            wait(lambda: track.poll().pods["warmup"] == 1, timeout=60, interval=0.05)
            # The operator's own CPU time per part: what it spent, whatever else the machine ran.
            cpu = [cpu_seconds(proc.pid)]

            # ---- 1. creation -> all N Pods, one job at a time ----
            latencies = []
            for i in range(args.latency_jobs):
                name = f"lat-{i}"
                start = time.perf_counter()
                custom.create_namespaced_custom_object(
                    "ddpjob.io", "v1alpha1", NS, "ddpjobs", ddpjob(name, args.latency_nodes)
                )
                done = wait(lambda: track.poll().pods[name] == args.latency_nodes, timeout=30, interval=0.002)  # noqa: B023 - the wait calls it before the loop moves on
                latencies.append(done - start)
            latencies.sort()
            p50 = statistics.median(latencies)
            p99 = latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))]
            print(
                f"creation -> all {args.latency_nodes} Pods, {args.latency_jobs} jobs one at a time: "
                f"p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms"
            )

            print(f"API client: {args.client}")
            cpu.append(cpu_seconds(proc.pid))
            if args.large_runs:
                large_gang(emu, custom, api, track, args.large_nodes, args.large_runs, proc.pid)
            cpu.append(cpu_seconds(proc.pid))

            # ---- 2. a burst of jobs ----
            first_request = len(emu.requests)
            burst = [f"burst-{i}" for i in range(args.jobs)]
            start = time.perf_counter()

            def create_all():
                # Through admission, as an HTTP create is: the CRD's defaults are in the
                # stored spec (without them the operator's first write defaults it, and
                # kopf sees a spec change and patches its annotation a second time).
                for name in burst:
                    emu.store.create(JOBS, NS, emu.admission.create(JOBS, NS, ddpjob(name, args.nodes), {}))

            in_emulator(emu, create_all)
            created = time.perf_counter()
            done = wait(
                lambda: sum(track.poll().pods[n] for n in burst) == args.jobs * args.nodes, timeout=600, interval=0.02
            )
            print(
                f"{args.jobs} DDPJobs x {args.nodes} Pods created at once ({created - start:.2f} s to store): "
                f"all {args.jobs * args.nodes} Pods exist after {done - start:.1f} s"
            )

            # ---- 3. drive them to Succeeded, count the operator's writes ----
            pods_by_job = {n: [f"{n}-{r}" for r in range(args.nodes)] for n in burst}
            all_pods = [p for names in pods_by_job.values() for p in names]
            kubelet(emu, all_pods, "Running")
            wait(lambda: track.poll().phases("burst-")["Running"] == args.jobs, timeout=600, interval=0.2)
            kubelet(emu, all_pods, "Succeeded")
            wait(lambda: track.poll().phases("burst-")["Succeeded"] == args.jobs, timeout=600, interval=0.2)
            finished = time.perf_counter()
            # kopf posts Events in the background: wait for three per job (Created, Running,
            # Succeeded), or until none came for 3 s (the emulator's 5-hex-digit generateName
            # makes a few Event names collide at this scale; kopf logs and drops those).
            last, quiet_since = -1, time.perf_counter()
            while time.perf_counter() - quiet_since < 3:
                count = sum(track.poll().events[n] for n in burst)
                if count >= 3 * args.jobs:
                    break
                if count != last:
                    last, quiet_since = count, time.perf_counter()
                time.sleep(0.2)
            peak = rss_peak_mb(proc.pid)
            cpu.append(cpu_seconds(proc.pid))
            print(
                f"operator CPU time: {cpu[1] - cpu[0]:.2f} s for the {args.latency_jobs} one-at-a-time jobs, "
                f"{cpu[2] - cpu[1]:.2f} s for the {args.large_nodes}-node job(s), "
                f"{cpu[3] - cpu[2]:.2f} s for the {args.jobs}-job burst to Succeeded"
            )
            print(f"all {args.jobs} jobs Succeeded {finished - done:.1f} s after their Pods existed")
            print(f"operator peak RSS (VmHWM): {peak:.0f} MB")

            writes = [
                r
                for r in emu.requests[first_request:]
                if r.verb in ("create", "update", "patch", "delete")
                and not (r.resource == "pods" and r.subresource == "status")
                and not (r.resource == "ddpjobs" and r.verb == "create")
            ]
            by_kind = collections.Counter(
                f"{r.verb} {r.resource}{'/' + r.subresource if r.subresource else ''}" for r in writes
            )
            print(
                f"API writes per job to Succeeded: {len(writes) / args.jobs:.2f} "
                f"(goal <= {args.nodes + 10}); per job: "
                + ", ".join(f"{k} {v / args.jobs:.2f}" for k, v in sorted(by_kind.items()))
            )
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def large_gang(
    emu: KubeEmulator, custom: Any, api: Any, track: Tracker, nodes: int, runs: int, operator_pid: int
) -> None:
    """4. One job of `nodes` Pods, `runs` times, each on an idle operator; then the
    emulator's own create ceiling."""
    times, writes = [], []
    for run in range(runs):
        name = f"large-{run}"
        wait_idle(operator_pid)
        first = len(emu.requests)
        start = time.perf_counter()
        custom.create_namespaced_custom_object("ddpjob.io", "v1alpha1", NS, "ddpjobs", ddpjob(name, nodes))
        done = wait(lambda: track.poll().pods[name] == nodes, timeout=120, interval=0.005)  # noqa: B023 - the wait calls it before the loop moves on
        times.append(done - start)
        pods = [f"{name}-{r}" for r in range(nodes)]
        kubelet(emu, pods, "Running")
        wait(lambda: track.poll().phase.get(name) == "Running", timeout=120, interval=0.05)  # noqa: B023 - the wait calls it before the loop moves on
        kubelet(emu, pods, "Succeeded")
        wait(lambda: track.poll().phase.get(name) == "Succeeded", timeout=120, interval=0.05)  # noqa: B023 - the wait calls it before the loop moves on
        time.sleep(1.0)  # Events are posted in the background
        writes.append(
            sum(
                1
                for r in emu.requests[first:]
                if r.verb in ("create", "update", "patch", "delete")
                and not (r.resource == "pods" and r.subresource == "status")
                and not (r.resource == "ddpjobs" and r.verb == "create")
            )
        )
        custom.delete_namespaced_custom_object("ddpjob.io", "v1alpha1", NS, "ddpjobs", name)
        wait(
            lambda: (
                not emu.list_objects("v1/pods", NS)
                or all(not p["metadata"]["name"].startswith(name + "-") for p in emu.list_objects("v1/pods", NS))  # noqa: B023 - the wait calls it before the loop moves on
            ),
            timeout=120,
            interval=0.1,
        )
    times.sort()
    print(
        f"{nodes}-node job: creation -> all Pods exist, {runs} runs: p50 {statistics.median(times):.2f} s "
        f"(runs {', '.join(f'{t:.2f}' for t in times)}); goal <= 2 s"
    )
    print(f"{nodes}-node job: API writes to Succeeded: {', '.join(map(str, writes))} (goal <= {nodes + 10})")

    # The emulator's ceiling: the same number of Pod creates from a client process of its
    # own (kubernetes_asyncio, 64 in flight, the operator's client and limit), in a
    # namespace the operator does not watch (kopf filters labels client-side, so it would
    # take every Pod event of its own namespace), so the emulator's process does nothing
    # but serve.
    out = subprocess.run(
        [sys.executable, "-c", CEILING_CLIENT, api.configuration.host, CEILING_NS, str(nodes)],
        input=json.dumps(ceiling_pod(ddpjob("ceiling", nodes), NS)),
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    took = float(out.split()[-1])  # timed by the client: its imports and start excluded
    print(
        f"emulator alone: {nodes} Pod creates (kubernetes_asyncio in its own process, 64 in flight) in "
        f"{took:.2f} s ({nodes / took:.0f} Pods/s)"
    )
    kubernetes.client.CoreV1Api(api).delete_collection_namespaced_pod(CEILING_NS, label_selector="bench=ceiling")


if __name__ == "__main__":
    main()
