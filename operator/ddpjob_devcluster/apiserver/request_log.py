"""The emulator's request log, as RBAC sees each request, and the faults a test injects into it.

`KubeEmulator.requests` records every resource request with its authorization verb (what
the RBAC tests compare with the chart's Roles); `KubeEmulator.inject_fault` makes the next
matching requests slow or failing.
"""

from __future__ import annotations

from typing import Any

from kmock._internal import rendering

# The records and faults themselves are shared with the fault proxy in front of the real
# API server (scenarios/api_requests.py); re-exported here for the emulator's users.
from ddpjob_devcluster.scenarios.api_requests import (
    REASONS,
    Fault,
    Faults,
    RecordedRequest,
    authorization_verb,
    hold,
)


def rbac_verb(request: rendering.Request) -> str:
    """The authorization verb of a request, as the API server's RequestInfo resolves it."""
    watch = request.params.get("watch") in ("true", "1")
    return authorization_verb(str(request.method.value), request.name, watch)


class RequestLog:
    """A mixin of `KubeEmulator` (whose attrs fields `requests` and `_faults` it uses)."""

    __slots__ = ()
    requests: list[RecordedRequest]
    _faults: Faults

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

    def inject_fault(self, **fault: Any) -> Fault:
        """A fault for the next matching requests (`api_requests.Faults.add`'s fields)."""
        return self._faults.add(**fault)


__all__ = ["REASONS", "Fault", "Faults", "RecordedRequest", "RequestLog", "hold", "rbac_verb"]
