"""What a hostile job costs the operator through the progress channel (issue: trust
boundaries). One 128-node job whose every Pod answers `/progress` with a fake stall and
256 KB of `ranks` (and six of them drip their answer a byte at a time), beside healthy
4-node jobs. Measured in one run, on the real control plane with the chart's operator in
its own process (benchmarks/plane_operator.py; no Nodes: this script plays the kubelet,
Pods Running at once, each at a Pod IP of its own where its fake launcher listens on the
contract's port):

- the operator's RSS before the hostile job and at its peak during it (goal: < 50 MB more);
- the operator's CPU over the window (goal: < 5% of one core for the hostile job's reads:
  the window's CPU minus the same window's without the hostile job);
- a healthy job's creation -> Running (p50 of 10), without and with the hostile job
  (goal: within 2x).

    .venv/bin/python benchmarks/hostile_progress.py [--window 60]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

import kubernetes

from ddpjob import contract
from plane_operator import NS, ddpjob, operator_plane  # scripts: their folder is on the path
from process_stats import cpu_seconds

NODES = 128
RANKS = {str(i): {"step": i, "pad": "x" * 8} for i in range(6_000)}  # about 250 KB of JSON (the cap is 256 KiB)
HOSTILE = json.dumps(
    {"record": {"step": 5, "total_steps": 100}, "seconds_since_progress": 9999, "eta_seconds": 1, "ranks": RANKS}
).encode()


class Launcher(BaseHTTPRequestHandler):
    drip = False

    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", str(len(HOSTILE)))
        self.end_headers()
        if self.drip:
            for _ in range(120):  # a byte every 2 s: each read well inside any per-read timeout
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(2)
        self.wfile.write(HOSTILE)

    def log_message(self, *_):
        pass


def serve(ip: str, drip: bool) -> ThreadingHTTPServer:
    handler = type("Drip" if drip else "Hostile", (Launcher,), {"drip": drip})
    server = ThreadingHTTPServer((ip, contract.DEFAULT_PROGRESS_PORT), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def rss_mb(pid: int) -> float:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Kubelet(threading.Thread):
    """Every Pod Running as soon as it exists; the hostile job's at its launchers' IPs."""

    def __init__(self, core: kubernetes.client.CoreV1Api):
        super().__init__(daemon=True)
        self.core, self.stop = core, threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for pod in self.core.list_namespaced_pod(NS).items:
                assert pod.metadata is not None and pod.metadata.name is not None  # a stored Pod has both
                if (pod.status and pod.status.phase == "Running") or pod.metadata.deletion_timestamp:
                    continue
                name = pod.metadata.name
                rank = int(name.rsplit("-", 1)[1])
                ip = f"127.251.0.{rank + 1}" if name.startswith("hostile-") else "127.252.0.1"
                status = {
                    "phase": "Running",
                    "podIP": ip,
                    "podIPs": [{"ip": ip}],
                    "containerStatuses": [
                        {
                            "name": "trainer",
                            "ready": True,
                            "restartCount": 0,
                            "image": "x",
                            "imageID": "",
                            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                        }
                    ],
                }
                with contextlib.suppress(kubernetes.client.ApiException):
                    self.core.patch_namespaced_pod_status(name, NS, {"status": status})
            self.stop.wait(0.05)


def latency(custom, prefix: str, runs: int = 10) -> float:
    times = []
    for i in range(runs):
        name, start = f"{prefix}-{i}", time.perf_counter()
        custom.create_namespaced_custom_object("ddpjob.io", "v1alpha1", NS, "ddpjobs", ddpjob(name, 4))
        while (
            custom.get_namespaced_custom_object("ddpjob.io", "v1alpha1", NS, "ddpjobs", name).get("status") or {}
        ).get("phase") != "Running":
            if time.perf_counter() - start > 60:
                raise TimeoutError(f"{name} did not run")
            time.sleep(0.01)
        times.append(time.perf_counter() - start)
        custom.delete_namespaced_custom_object("ddpjob.io", "v1alpha1", NS, "ddpjobs", name)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--interval", type=float, default=5.0, help="the operator's progress read interval")
    args = parser.parse_args()
    servers = [serve(f"127.251.0.{i + 1}", drip=i >= NODES - 6) for i in range(NODES)]  # Pod 0 answers
    env = {"DDPJOB_PROGRESS_INTERVAL_SECONDS": str(args.interval)}
    with tempfile.TemporaryDirectory() as tmp, operator_plane(pathlib.Path(tmp), env=env) as bench:
        custom, core = kubernetes.client.CustomObjectsApi(bench.api), kubernetes.client.CoreV1Api(bench.api)
        kubelet = Kubelet(core)
        kubelet.start()
        try:
            quiet = latency(custom, "warm", 3) and latency(custom, "quiet")
            cpu0, t0 = cpu_seconds(bench.pid), time.perf_counter()
            time.sleep(args.window)
            idle_cpu = (cpu_seconds(bench.pid) - cpu0) / (time.perf_counter() - t0)
            rss_before = rss_mb(bench.pid)
            custom.create_namespaced_custom_object(
                "ddpjob.io",
                "v1alpha1",
                NS,
                "ddpjobs",
                ddpjob("hostile", NODES, stallTimeoutSeconds=3600, maxRestarts=1000),
            )
            time.sleep(args.interval * 2)
            cpu0, t0, peak = cpu_seconds(bench.pid), time.perf_counter(), rss_before
            loaded = latency(custom, "loaded")
            while time.perf_counter() - t0 < args.window:
                peak = max(peak, rss_mb(bench.pid))
                time.sleep(0.5)
            busy_cpu = (cpu_seconds(bench.pid) - cpu0) / (time.perf_counter() - t0)
            hostile = cast(
                dict[str, Any], custom.get_namespaced_custom_object("ddpjob.io", "v1alpha1", NS, "ddpjobs", "hostile")
            )
            restarts = (hostile.get("status") or {}).get("restarts")
        finally:
            kubelet.stop.set()
            for server in servers:
                server.shutdown()
    print(f"load average {os.getloadavg()}; read interval {args.interval:g} s; window {args.window:g} s")
    print(
        f"operator RSS: {rss_before:.0f} MB before the hostile job, peak {peak:.0f} MB during "
        f"(+{peak - rss_before:.0f} MB; goal < 50)"
    )
    print(
        f"operator CPU: {idle_cpu * 100:.1f}% of a core without it, {busy_cpu * 100:.1f}% with it "
        f"(+{(busy_cpu - idle_cpu) * 100:.1f}%; goal < 5%); the hostile job's gang restarts: {restarts}"
    )
    print(
        f"healthy 4-node job, creation -> Running p50: {quiet * 1000:.0f} ms without, {loaded * 1000:.0f} ms with "
        f"({loaded / quiet:.2f}x; goal <= 2x)"
    )


if __name__ == "__main__":
    main()
