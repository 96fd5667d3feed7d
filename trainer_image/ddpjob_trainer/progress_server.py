"""ddpjob-launch's progress endpoint: `/progress` (JSON) and `/metrics` (Prometheus text),
and, for an elastic job that resizes in place, `POST /notice` (ddpjob.notice: the
operator's word that nodes were lost, authenticated, bounded, handed to the node's store).

The first two are read from the progress record and the ranks' heartbeats on each request
(`ddpjob.progress_record`); nothing is pushed anywhere. The server runs in a daemon
thread of the launcher, so it lives exactly as long as the Pod's main process.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from ddpjob import notice, progress_record

Notices = tuple[str | None, Callable[[tuple[int, ...]], object]]  # (the job's token, where lost nodes go)

# Record field -> (metric name, help).
_GAUGES = {
    "step": ("ddpjob_progress_step", "Optimizer steps done (the progress record's step)"),
    "total_steps": ("ddpjob_progress_total_steps", "Optimizer steps the job will take"),
    "epoch": ("ddpjob_progress_epoch", "Epochs done"),
    "samples_per_s": ("ddpjob_progress_samples_per_second", "Training throughput over all ranks"),
    "loss": ("ddpjob_progress_loss", "The last reported training loss"),
    # Who wrote it (ddpjob-train): a record of an attempt or group the job moved on without
    # is not the job's progress (fence.py).
    "restart": ("ddpjob_progress_restart", "The gang attempt of the record's writer (DDPJOB_RESTART_COUNT)"),
    "generation": ("ddpjob_progress_generation", "The writer's group within the attempt (elastic jobs)"),
    "term": ("ddpjob_progress_fence_term", "The writer's term of the job's checkpoint fence"),
}


class ProgressSource:
    """One Tracker behind a lock: requests may come in on several threads."""

    def __init__(self, progress_file: str):
        self.path = progress_file
        self.tracker = progress_record.Tracker()
        self.lock = threading.Lock()

    def snapshot(self) -> dict:
        with self.lock:
            return self.tracker.snapshot(self.path)


class _Collector:
    def __init__(self, source: ProgressSource):
        self.source = source

    def collect(self):
        snap = self.source.snapshot()
        record = snap["record"] or {}
        for key, (name, help_) in _GAUGES.items():
            if record.get(key) is not None:
                yield GaugeMetricFamily(name, help_, value=float(record[key]))
        yield GaugeMetricFamily(
            "ddpjob_progress_seconds_since_progress",
            "Seconds since the progress record last advanced (or since start)",
            value=snap["seconds_since_progress"],
        )
        if snap["eta_seconds"] is not None:
            yield GaugeMetricFamily(
                "ddpjob_progress_eta_seconds", "Estimated seconds to the last step", value=snap["eta_seconds"]
            )
        age = GaugeMetricFamily(
            "ddpjob_rank_heartbeat_age_seconds", "Seconds since a rank's last heartbeat", labels=["rank"]
        )
        step = GaugeMetricFamily("ddpjob_rank_step", "The step a rank has reached", labels=["rank"])
        for rank, beat in snap["ranks"].items():
            age.add_metric([rank], beat["heartbeat_age"])
            step.add_metric([rank], beat["step"])
        yield age
        yield step


def make_server(progress_file: str, host: str, port: int, notices: Notices | None = None) -> ThreadingHTTPServer:
    source = ProgressSource(progress_file)
    guard = notice.ReplayGuard()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(source))

    class Handler(BaseHTTPRequestHandler):
        timeout = 5.0  # per socket read: a client that drips its request is cut off

        def do_GET(self):  # noqa: N802 (http.server's name)
            path = self.path.split("?", 1)[0]
            if path == "/progress":
                body, ctype = json.dumps(source.snapshot()).encode(), "application/json"
            elif path == "/metrics":
                body, ctype = generate_latest(registry), CONTENT_TYPE_LATEST
            else:
                self.send_error(404, "try /progress or /metrics")
                return
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):  # noqa: N802 (http.server's name)
            if self.path.split("?", 1)[0] != notice.PATH or notices is None:
                self.send_error(404, "nothing to post here")
                return
            try:
                length = int(self.headers.get("Content-Length") or "-1")
            except ValueError:
                length = -1
            if not 0 <= length <= notice.MAX_BODY:
                self.send_error(413 if length > notice.MAX_BODY else 411, "a notice has a Content-Length within bounds")
                return
            token, take = notices
            try:
                lost = notice.verify(
                    token, self.rfile.read(length), self.headers.get(notice.HEADER), time.time(), guard
                )
            except notice.NoticeError as e:
                self.send_error(e.status, str(e))
                return
            take(lost)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *_):  # one line per poll would drown the training log
            pass

    server = _Server((host, port), Handler)
    server.daemon_threads = True
    return server


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        # A client that gave up before its answer (a peer's probe has a 1 s deadline, and
        # this node may have been frozen past it) is no error of this server: no traceback
        # in the training log, as the kind tier's thawed node printed one per probe.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def serve_in_thread(progress_file: str, host: str, port: int, notices: Notices | None = None) -> ThreadingHTTPServer:
    """Start serving; raises OSError when the address is taken."""
    server = make_server(progress_file, host, port, notices)
    threading.Thread(target=server.serve_forever, name="ddpjob-progress", daemon=True).start()
    return server
