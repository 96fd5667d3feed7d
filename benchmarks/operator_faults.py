"""The operator against a struggling API server: time from DDPJob creation to Succeeded
when a share of the operator's requests (0%, 30%, 60%) is answered with 500/503/429 and
every watch stream of it is closed after about 3 s (at 0% too) (ddpjob_devcluster.scenarios.chaos),
by a fault proxy between the operator and the real kube-apiserver
(ddpjob_devcluster.scenarios.fault_proxy; benchmarks/plane_operator.py).

The operator runs in its own process (the chart's, as its ServiceAccount); the script
plays the kubelet on the API server directly, as the admin (its own writes are not
subject to the faults): as soon as a job's Pods all exist it reports them Running, and
once the job says Running it reports them Succeeded. Per fault rate: --jobs jobs of
--nodes Pods created together; the time until each is Succeeded; whether any Pod was
created twice.

    .venv/bin/python benchmarks/operator_faults.py [--jobs 5] [--nodes 4] [--rates 0,0.3,0.6]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import tempfile
import time

import kubernetes

from ddpjob_devcluster.scenarios.chaos import Chaos

# A benchmark run as a script has its own folder first on the import path.
from plane_operator import NS, Bench, Tracker, ddpjob, kubelet, operator_plane, wait

# The proxy decides a watch stream's lifetime when the stream opens: streams are closed
# every ~3 s at every rate, 0% included, so that each rate's streams are its own.
WATCH_LIFETIME = 3.0


def run_rate(bench: Bench, track: Tracker, rate: float, jobs: int, nodes: int, timeout: float) -> list[float]:
    assert bench.proxy is not None  # operator_plane(faults=...)
    chaos = bench.proxy.chaos = Chaos(rate=rate, watch_lifetime=WATCH_LIFETIME, seed=1)
    custom, core = kubernetes.client.CustomObjectsApi(bench.api), kubernetes.client.CoreV1Api(bench.api)
    names = [f"r{int(rate * 100)}-{i}" for i in range(jobs)]
    start = time.perf_counter()
    for n in names:
        custom.create_namespaced_custom_object("ddpjob.io", "v1alpha1", NS, "ddpjobs", ddpjob(n, nodes))
    done: dict[str, float] = {}
    running_sent, succeeded_sent = set(), set()
    while len(done) < len(names):
        if time.perf_counter() - start > timeout:
            raise TimeoutError(f"rate {rate}: only {len(done)} of {len(names)} jobs Succeeded in {timeout}s")
        for n in names:
            if n not in running_sent and track.count(n) >= nodes:
                kubelet(core, [f"{n}-{r}" for r in range(nodes)], "Running")
                running_sent.add(n)
            if n not in succeeded_sent and track.phase.get(n) == "Running":
                kubelet(core, [f"{n}-{r}" for r in range(nodes)], "Succeeded")
                succeeded_sent.add(n)
            if n not in done and track.phase.get(n) == "Succeeded":
                done[n] = time.perf_counter() - start
        time.sleep(0.01)
    bench.proxy.chaos = Chaos(rate=0, watch_lifetime=WATCH_LIFETIME)
    duplicates = {n: track.count(n) for n in names if track.count(n) != nodes}
    times = sorted(done.values())
    print(
        f"faults {rate:4.0%}: {jobs} jobs x {nodes} Pods created -> Succeeded: "
        f"median {statistics.median(times):.2f} s, max {times[-1]:.2f} s; {chaos.failed} requests failed, "
        f"{bench.proxy.cut_watches} watches cut so far; Pods created more than once: {duplicates or 'none'}",
        flush=True,
    )
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--rates", default="0,0.3,0.6")
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    calm = Chaos(rate=0, watch_lifetime=WATCH_LIFETIME)
    with tempfile.TemporaryDirectory() as tmp, operator_plane(pathlib.Path(tmp), faults=calm) as bench:
        track = Tracker(bench.api)
        kubernetes.client.CustomObjectsApi(bench.api).create_namespaced_custom_object(
            "ddpjob.io", "v1alpha1", NS, "ddpjobs", ddpjob("warmup", 1)
        )
        wait(lambda: track.count("warmup") >= 1, 120, 0.05)
        for rate in (float(r) for r in args.rates.split(",")):
            run_rate(bench, track, rate, args.jobs, args.nodes, args.timeout)
            if not bench.operator.alive:
                raise RuntimeError(f"the operator exited ({bench.operator.returncode})")
        print(f"operator still running after every rate: {bench.operator.alive}")
        track.stop.set()
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
