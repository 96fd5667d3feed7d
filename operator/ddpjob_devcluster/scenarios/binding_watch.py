"""The Pods of a namespace as a watch sees them bound, for the gang scenario
(`real_gang`, on the real control plane).

Each binding is timed (the moment `spec.nodeName` first appears in an event, finer than
the PodScheduled condition's one-second resolution) and says how many Pods of its job
the watch had seen by then, itself included. The watch starts from a listing of the empty
namespace, made before the scenario's first write, and each stream goes on from the last
event's resourceVersion (it never lists again), so it sees every change in the server's
order: that count is what existed when the Pod was bound, whatever the machine's speed. A
gang bound whole has all its peers at each binding; one placed Pod by Pod has fewer.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal

import kubernetes

from ddpjob.api import names
from ddpjob.api.quantity import parse_quantity


@dataclass
class Binding:
    """One Pod bound to a Node, as `gang.idle_seconds` reads it."""

    pod: str
    labels: dict[str, str]
    requests: dict[str, Decimal]
    time: float
    peers: int = 0  # Pods of its job that existed when it was bound, itself included


@dataclass
class BindingWatch:
    """Records each Pod's first binding in `namespace`, from a watch, until `stop()`."""

    core: kubernetes.client.CoreV1Api
    namespace: str
    bindings: list[Binding] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _error: BaseException | None = None

    def start(self) -> BindingWatch:
        """Call before the scenario's first Pod: the count starts from an empty namespace."""
        listing = self.core.list_namespaced_pod(self.namespace)
        version = listing.metadata.resource_version if listing.metadata else None
        if listing.items:
            raise RuntimeError(
                f"namespace {self.namespace} already has Pods "
                f"({', '.join(str(p.metadata and p.metadata.name) for p in listing.items)}): the binding watch "
                "must start before the first one"
            )
        self._thread = threading.Thread(target=self._run, args=(version,), name="binding-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[Binding]:
        """The bindings seen, in time order; raises what ended the watch early, if anything did."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15)  # the watch's own timeout ends it at the latest
        if self._error is not None:
            raise RuntimeError(f"the binding watch of {self.namespace} ended early: {self._error}") from self._error
        return sorted(self.bindings, key=lambda b: b.time)

    def _run(self, version: str) -> None:
        try:
            self._follow(version)
        except Exception as exc:  # noqa: BLE001 - reported by stop(), in the scenario's thread
            self._error = exc

    def _follow(self, version: str) -> None:
        bound: set[str] = set()
        existed: dict[str, set[str]] = {}  # job -> uids of its Pods seen so far
        while not self._stop.is_set():
            # Short server-side timeouts, so stop() is heard within seconds.
            stream = kubernetes.watch.Watch().stream(
                self.core.list_namespaced_pod, self.namespace, resource_version=version, timeout_seconds=2
            )
            for event in stream:
                pod = event["object"]
                version = pod.metadata.resource_version
                labels = dict(pod.metadata.labels or {})
                peers = existed.setdefault(labels.get(names.LABEL_JOB_NAME, pod.metadata.name), set())
                peers.add(pod.metadata.uid)
                if pod.spec.node_name and pod.metadata.uid not in bound:
                    bound.add(pod.metadata.uid)
                    requests: dict[str, Decimal] = {}
                    for c in pod.spec.containers:
                        for key, qty in ((c.resources.limits or {}) | (c.resources.requests or {})).items():
                            requests[key] = requests.get(key, Decimal(0)) + parse_quantity(qty)
                    self.bindings.append(Binding(pod.metadata.name, labels, requests, time.time(), len(peers)))
                if self._stop.is_set():
                    break
