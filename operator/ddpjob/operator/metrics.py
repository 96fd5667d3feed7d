"""Prometheus metrics of one operator instance.

Each `OperatorMetrics` has its own registry (not prometheus-client's global one), so
an operator started twice in one process (tests, the benchmark) never registers a
metric twice, and every instance can be read in isolation.
"""

from __future__ import annotations

from collections import Counter as _Tally
from collections.abc import Callable, Iterable, Mapping
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ddpjob.job.lifecycle import FAILED, PENDING, RESTARTING, RUNNING, SUCCEEDED, SUSPENDED

PHASES = (PENDING, RUNNING, RESTARTING, SUCCEEDED, FAILED, SUSPENDED)


class _JobsByPhase(Collector):
    """`ddpjob_jobs{phase}`, computed at scrape time from the operator's own view."""

    def __init__(self, phases: Callable[[], Iterable[str]]):
        self._phases = phases

    def collect(self):
        tally = _Tally(self._phases())
        family = GaugeMetricFamily("ddpjob_jobs", "DDPJobs this operator serves, by status.phase", labels=["phase"])
        for phase in PHASES + tuple(sorted(set(tally) - set(PHASES))):
            family.add_metric([phase], tally.get(phase, 0))
        yield family


class OperatorMetrics:
    def __init__(self, phases: Callable[[], Iterable[str]] = tuple):
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(_JobsByPhase(phases))
        # Buckets from 5 ms (a no-op reconcile) to 30 s (a slow, retrying API server).
        self.reconcile_seconds = Histogram(
            "ddpjob_reconcile_duration_seconds",
            "Time of one reconcile of one DDPJob",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self.reconcile_errors = Counter(
            "ddpjob_reconcile_errors", "Reconciles that failed and were retried with backoff", registry=self.registry
        )
        self.pods_created = Counter("ddpjob_pods_created", "Pods created by the operator", registry=self.registry)
        self.gang_restarts = Counter(
            "ddpjob_gang_restarts", "Gang restarts (all Pods of a job deleted and recreated)", registry=self.registry
        )
        self._server: WSGIServer | None = None

    def serve(self, port: int, addr: str = "0.0.0.0") -> None:
        """Serve /metrics from a thread (prometheus-client's own HTTP server)."""
        self._server, _thread = start_http_server(port, addr=addr, registry=self.registry)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def sample(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        """One sample's value, for tests and the benchmark."""
        return self.registry.get_sample_value(name, dict(labels or {}))
