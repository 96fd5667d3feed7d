"""The emulator's request log, as RBAC sees each request, and the faults a test injects into it.

`KubeEmulator.requests` records every resource request with its authorization verb (what
the RBAC tests compare with the chart's Roles); `KubeEmulator.inject_fault` makes the next
matching requests slow or failing.
"""

from __future__ import annotations

import threading

from kmock._internal import rendering

# The records and faults themselves are shared with the fault proxy in front of the real
# API server (scenarios/api_requests.py); re-exported here for the emulator's users.
from ddpjob_devcluster.scenarios.api_requests import REASONS, Fault, RecordedRequest, authorization_verb, hold


def rbac_verb(request: rendering.Request) -> str:
    """The authorization verb of a request, as the API server's RequestInfo resolves it."""
    watch = request.params.get("watch") in ("true", "1")
    return authorization_verb(str(request.method.value), request.name, watch)


class RequestLog:
    """A mixin of `KubeEmulator` (whose attrs fields `requests`, `_faults` and `_log_lock` it uses)."""

    __slots__ = ()
    requests: list[RecordedRequest]
    _faults: list[Fault]
    _log_lock: threading.Lock

    def _record(self, request: rendering.Request) -> RecordedRequest | None:
        """Log a request for a resource (None: discovery and the like, not logged)."""
        if request.resource is None or not request.resource.plural:
            return None
        record = RecordedRequest(
            rbac_verb(request),
            request.resource.group or "",
            request.resource.version or "",
            request.resource.plural,
            request.subresource,
            request.namespace,
            request.name,
        )
        self.requests.append(record)
        return record

    def inject_fault(
        self,
        *,
        verb: str | None = None,
        resource: str | None = None,
        subresource: str | None = None,
        status: int | None = 500,
        count: int = 1,
        delay: float = 0.0,
        skip: int = 0,
        release: threading.Event | None = None,
    ) -> Fault:
        """Make the next `count` matching requests (after `skip` of them) wait `delay`
        seconds (or until `release` is set, at most `delay`), then fail with `status`
        (or, with status=None, proceed normally: a slow API server)."""
        fault = Fault(verb, resource, subresource, status, count, delay, skip, release)
        with self._log_lock:
            self._faults.append(fault)
        return fault

    def _take_fault(self, record: RecordedRequest) -> Fault | None:
        with self._log_lock:
            for fault in self._faults:
                if fault.matches(record):
                    fault.count -= 1
                    return fault
        return None


__all__ = ["REASONS", "Fault", "RecordedRequest", "RequestLog", "hold", "rbac_verb"]
