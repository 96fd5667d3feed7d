"""What progress polling costs the operator: API writes and CPU per minute with N Running jobs.

The operator runs in its own process on the real control plane (benchmarks/plane_operator.py:
kube-apiserver, etcd, controller manager and scheduler, no Nodes, the chart's operator);
this script plays the kubelet (every job's one Pod reported Running with a Pod IP) and the
Pods' launchers: one HTTP server at that Pod IP answers every `/progress` with a record
whose step has advanced since the last read, the worst case (every read is news, so every
read may cost a status write). For each N it runs the operator twice, with polling at its
defaults (every 30 s per job, jittered, 50 reads/s cap, 5 progress writes/s cap) and with
polling off (DDPJOB_PROGRESS_INTERVAL_SECONDS=0), and measures over a window after a
warm-up long enough for the writes to reach their steady state (`warmup`):

- status writes per job per 30 s (goal <= 1), counted in the API server's audit log;
- the operator's CPU seconds per minute (utime + stime of its process), on vs off
  (goal: polling adds < 10% at 1,000 jobs);
- /progress reads per job per 30 s, counted at the fake launcher.

    .venv/bin/python benchmarks/progress_overhead.py [--jobs 100 1000] [--window 60]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import pathlib
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import kubernetes

from ddpjob import contract
from ddpjob.operator.progress import DEFAULT_INTERVAL, DEFAULT_MAX_WRITES_PER_SECOND
from plane_operator import NS, Tracker, ddpjob, kubelet, operator_plane, wait  # scripts: their folder is on the path
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


def measure(jobs: int, polling: bool, window: float, advancing: bool = True) -> dict:
    env = {"DDPJOB_PROGRESS_INTERVAL_SECONDS": "30" if polling else "0"}
    with tempfile.TemporaryDirectory() as tmp, operator_plane(pathlib.Path(tmp), env=env) as bench:
        custom, core = kubernetes.client.CustomObjectsApi(bench.api), kubernetes.client.CoreV1Api(bench.api)
        track = Tracker(bench.api, kinds=("pods", "jobs"))
        names = [f"p-{i}" for i in range(jobs)]
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(
                pool.map(
                    lambda n: custom.create_namespaced_custom_object(
                        "ddpjob.io", "v1alpha1", NS, "ddpjobs", ddpjob(n, 1, stallTimeoutSeconds=3600)
                    ),
                    names,
                )
            )
        launchers = FakeLaunchers(advancing)
        try:
            wait(lambda: track.count(*names) == jobs, 600, 0.2)
            kubelet(core, [f"{n}-0" for n in names], "Running", podIP=POD_IP, podIPs=[{"ip": POD_IP}])
            wait(lambda: track.phases("p-")["Running"] == jobs, 600, 0.2)
            time.sleep(warmup(jobs) if polling else WARMUP)
            bench.mark()
            reads0, cpu0, t0 = launchers.reads, cpu_seconds(bench.pid), time.monotonic()
            time.sleep(window)
            elapsed = time.monotonic() - t0
            cpu = cpu_seconds(bench.pid) - cpu0
            writes = bench.writes()
            reads = launchers.reads - reads0
        finally:
            track.stop.set()
            launchers.close()
    status_writes = sum(1 for w in writes if w.split(" (")[0] in ("patch ddpjobs/status", "update ddpjobs/status"))
    other_writes = len(writes) - status_writes
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
