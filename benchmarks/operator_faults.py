"""The operator against a struggling API server: time from DDPJob creation to Succeeded
when a share of all requests (0%, 30%, 60%) is answered with 500/503/429 and every watch
stream is closed after about 3 s (ddpjob_devcluster.scenarios.chaos).

The operator runs in its own process (KUBECONFIG, like in a shell); the script plays the
kubelet directly on the emulator's store (its own writes are not subject to the faults):
as soon as a job's Pods all exist it reports them Running, and once the job says
Running it reports them Succeeded. Per fault rate: --jobs jobs of --nodes Pods created
together; the time until each is Succeeded; whether any Pod was created twice.

    .venv/bin/python benchmarks/operator_faults.py [--jobs 5] [--nodes 4] [--rates 0,0.3,0.6]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import tempfile
import time

from ddpjob_devcluster.apiserver.emulator import KubeEmulator
from ddpjob_devcluster.scenarios.chaos import Chaos

# A benchmark run as a script has its own folder first on the import path.
from emulated_operator import JOBS, NS, Tracker, crd_client, ddpjob, in_emulator, kubelet, start_operator


def run_rate(emu: KubeEmulator, track: Tracker, rate: float, jobs: int, nodes: int, timeout: float) -> list[float]:
    emu.chaos = Chaos(rate=rate, watch_lifetime=3.0, seed=1) if rate else None
    names = [f"r{int(rate * 100)}-{i}" for i in range(jobs)]
    start = time.perf_counter()
    in_emulator(
        emu, lambda: [emu.store.create(JOBS, NS, emu.admission.create(JOBS, NS, ddpjob(n, nodes), {})) for n in names]
    )
    done: dict[str, float] = {}
    running_sent, succeeded_sent = set(), set()
    while len(done) < len(names):
        if time.perf_counter() - start > timeout:
            raise TimeoutError(f"rate {rate}: only {len(done)} of {len(names)} jobs Succeeded in {timeout}s")
        track.poll()
        for n in names:
            if n not in running_sent and track.pods[n] >= nodes:
                kubelet(emu, [f"{n}-{r}" for r in range(nodes)], "Running")
                running_sent.add(n)
            if n not in succeeded_sent and track.phase.get(n) == "Running":
                kubelet(emu, [f"{n}-{r}" for r in range(nodes)], "Succeeded")
                succeeded_sent.add(n)
            if n not in done and track.phase.get(n) == "Succeeded":
                done[n] = time.perf_counter() - start
        time.sleep(0.01)
    failed = emu.chaos.failed if emu.chaos else 0
    emu.chaos = None
    duplicates = {n: track.pods[n] for n in names if track.pods[n] != nodes}
    times = sorted(done.values())
    print(
        f"faults {rate:4.0%}: {jobs} jobs x {nodes} Pods created -> Succeeded: "
        f"median {statistics.median(times):.2f} s, "
        f"max {times[-1]:.2f} s; {failed} requests failed; Pods created more than once: {duplicates or 'none'}",
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
    with KubeEmulator() as emu, tempfile.TemporaryDirectory() as tmp:
        kubeconfig, _ = crd_client(emu, pathlib.Path(tmp))
        proc = start_operator(kubeconfig, os.environ.get("OPERATOR_LOG") or pathlib.Path(tmp) / "operator.log")
        try:
            track = Tracker(emu)
            in_emulator(
                emu, lambda: emu.store.create(JOBS, NS, emu.admission.create(JOBS, NS, ddpjob("warmup", 1), {}))
            )
            deadline = time.monotonic() + 60
            while track.poll().pods["warmup"] < 1:
                if time.monotonic() > deadline:
                    raise TimeoutError("the operator did not start")
                time.sleep(0.05)
            for rate in (float(r) for r in args.rates.split(",")):
                run_rate(emu, track, rate, args.jobs, args.nodes, args.timeout)
                if proc.poll() is not None:
                    raise RuntimeError(f"the operator exited ({proc.returncode})")
            print(f"operator still running after every rate: {proc.poll() is None}")
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
