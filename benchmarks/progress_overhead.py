"""What progress polling costs the operator: API writes and CPU per minute with N Running jobs.

The operator runs in its own process against the API emulator (`ddpjob_devcluster.apiserver.emulator`);
this script plays the kubelet (every job's one Pod reported Running with a Pod IP) and the
Pods' launchers: one HTTP server at that Pod IP answers every `/progress` with a record
whose step has advanced since the last read, the worst case (every read is news, so every
read may cost a status write). For each N it runs the operator twice, with polling at its
defaults (every 30 s per job, jittered, 50 reads/s cap, 5 progress writes/s cap) and with
polling off (DDPJOB_PROGRESS_INTERVAL_SECONDS=0), and measures over a window after a
warm-up long enough for the writes to reach their steady state (`warmup`):

- status writes per job per 30 s (goal <= 1), counted at the emulator;
- the operator's CPU seconds per minute (utime + stime of its process), on vs off
  (goal: polling adds < 10% at 1,000 jobs);
- /progress reads per job per 30 s, counted at the fake launcher.

    .venv/bin/python benchmarks/progress_overhead.py [--jobs 100 1000] [--window 60]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ddpjob import contract
from ddpjob.operator.progress import DEFAULT_INTERVAL, DEFAULT_MAX_WRITES_PER_SECOND
from ddpjob_devcluster.apiserver.emulator import KubeEmulator
from ddpjob_devcluster.apiserver.errors import ApiError
from emulated_operator import (  # scripts: their folder is on the path
    JOBS,
    NS,
    PODS,
    crd_client,
    in_emulator,
    start_operator,
)
from process_stats import cpu_seconds

POD_IP = "127.250.0.1"  # every Pod's IP: one fake launcher answers for all of them
WARMUP = 35.0  # the first reads are spread over one 30 s interval


def warmup(jobs: int) -> float:
    """Until writes are in their steady state: every job's first record is written at its
    first read; its next one waits the write interval (progress.py), which the operator's
    write cap stretches beyond 30 s past 150 jobs."""
    return WARMUP + max(DEFAULT_INTERVAL, jobs / DEFAULT_MAX_WRITES_PER_SECOND)


class FakeLaunchers:
    def __init__(self, advancing: bool = True):
        self.reads = 0
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                with outer.lock:
                    outer.reads += 1
                    # Advanced since any earlier read (worst case), or never (reads only).
                    step = outer.reads if advancing else 1
                body = json.dumps(
                    {
                        "record": {
                            "step": step,
                            "total_steps": 10**9,
                            "epoch": 1,
                            "total_epochs": 9,
                            "samples_per_s": 1000.0,
                            "loss": 0.5,
                            "time": time.time() if advancing else 1.7e9,
                        },
                        "seconds_since_progress": 0.0,
                        "eta_seconds": 3600,
                        "ranks": {},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_):
                pass

        self.server = ThreadingHTTPServer((POD_IP, contract.DEFAULT_PROGRESS_PORT), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def job(name: str) -> dict:
    return {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"nodes": 1, "image": "ddpjob/trainer:bench", "stallTimeoutSeconds": 3600},
    }


def get(emu: KubeEmulator, res, name: str) -> dict | None:
    try:
        return emu.store.get(res, NS, name)
    except ApiError:  # not there (yet): the store's 404
        return None


def wait(predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark condition not met")
        time.sleep(0.2)


def measure(jobs: int, polling: bool, window: float, advancing: bool = True) -> dict:
    with KubeEmulator() as emu, tempfile.TemporaryDirectory() as tmp:
        kubeconfig, _ = crd_client(emu, pathlib.Path(tmp))
        names = [f"p-{i}" for i in range(jobs)]
        in_emulator(
            emu,
            lambda: [emu.store.create(JOBS, NS, emu.admission.create(JOBS, NS, job(n), {})) for n in names],
            timeout=300,
        )
        env = {"DDPJOB_PROGRESS_INTERVAL_SECONDS": "30" if polling else "0"}
        proc = start_operator(kubeconfig, pathlib.Path(tmp) / "operator.log", env)
        launchers = FakeLaunchers(advancing)
        try:
            pods = [f"{n}-0" for n in names]
            wait(lambda: all(get(emu, PODS, p) is not None for p in pods), 300)
            patch = {
                "status": {
                    "phase": "Running",
                    "podIP": POD_IP,
                    "podIPs": [{"ip": POD_IP}],
                    "containerStatuses": [
                        {"name": "trainer", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}
                    ],
                }
            }
            in_emulator(
                emu,
                lambda: [emu.store.patch(PODS, NS, p, "status", "application/merge-patch+json", patch) for p in pods],
                timeout=300,
            )
            wait(
                lambda: all(((get(emu, JOBS, n) or {}).get("status") or {}).get("phase") == "Running" for n in names),
                300,
            )
            time.sleep(warmup(jobs) if polling else WARMUP)
            first, reads0, cpu0, t0 = len(emu.requests), launchers.reads, cpu_seconds(proc.pid), time.monotonic()
            time.sleep(window)
            elapsed = time.monotonic() - t0
            cpu = cpu_seconds(proc.pid) - cpu0
            reqs = emu.requests[first:]
            status_writes = sum(
                1
                for r in reqs
                if r.resource == "ddpjobs" and r.subresource == "status" and r.verb in ("patch", "update")
            )
            other_writes = sum(1 for r in reqs if r.verb in ("create", "update", "patch", "delete")) - status_writes
            reads = launchers.reads - reads0
        finally:
            launchers.close()
            proc.terminate()
            proc.wait(timeout=60)
    per30 = 30.0 / elapsed / jobs
    return {
        "jobs": jobs,
        "polling": polling,
        "advancing": advancing,
        "window_s": round(elapsed, 1),
        "status_writes_per_job_per_30s": round(status_writes * per30, 3),
        "other_writes": other_writes,
        "reads_per_job_per_30s": round(reads * per30, 3),
        "cpu_s_per_min": round(cpu * 60.0 / elapsed, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument(
        "--reads-only",
        action="store_true",
        help="also measure a record that never advances: the cost of reads without writes",
    )
    args = parser.parse_args()
    for n in args.jobs:
        if args.reads_only:
            still = measure(n, True, args.window, advancing=False)
            print(json.dumps(still))
            print(
                f"{n} Running jobs, record never advancing: {still['status_writes_per_job_per_30s']:.2f} status "
                f"writes/job/30 s, operator CPU {still['cpu_s_per_min']:.2f} s/min",
                flush=True,
            )
        on = measure(n, True, args.window)
        off = measure(n, False, args.window)
        added = on["cpu_s_per_min"] - off["cpu_s_per_min"]
        print(json.dumps(on))
        print(json.dumps(off))
        # A steady operator with polling off does almost nothing, so "percent more than off"
        # divides by ~0; the cost is given as CPU seconds per minute and as a share of one core.
        print(
            f"{n} Running jobs: {on['status_writes_per_job_per_30s']:.2f} status writes/job/30 s (goal <= 1), "
            f"{on['reads_per_job_per_30s']:.2f} /progress reads/job/30 s; operator CPU "
            f"{on['cpu_s_per_min']:.2f} s/min polling vs {off['cpu_s_per_min']:.2f} s/min off: polling adds "
            f"{added:.2f} CPU s/min = {added / 60 * 100:.1f}% of one core",
            flush=True,
        )


if __name__ == "__main__":
    main()
