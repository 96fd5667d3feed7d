"""The emulator's request log, as RBAC sees each request, and the faults a test injects into it.

`KubeEmulator.requests` records every resource request with its authorization verb (what
the RBAC tests compare with the chart's Roles); `KubeEmulator.inject_fault` makes the next
matching requests slow or failing.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import NamedTuple

import attrs
from kmock._internal import rendering


class RecordedRequest(NamedTuple):
    """One request as RBAC sees it: `verb` is the Kubernetes authorization verb."""

    verb: str
    group: str
    version: str
    resource: str
    subresource: str | None
    namespace: str | None
    name: str | None


async def hold(delay: float, release: threading.Event | None, stopping: asyncio.Event | None = None) -> None:
    """Wait `delay` seconds, or less: until `release` is set (a scenario's thread sets it at
    the event it waits for; it is looked at every 50 ms) or `stopping` is."""
    end = time.monotonic() + delay
    while not (stopping is not None and stopping.is_set()) and not (release is not None and release.is_set()):
        left = end - time.monotonic()
        if left <= 0:
            return
        step = left if release is None else min(left, 0.05)
        if stopping is None:
            await asyncio.sleep(step)  # the event loop serves the other requests meanwhile
        else:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stopping.wait(), step)


@attrs.define
class Fault:
    """The next `count` requests matching verb/resource fail with `status` after `delay`;
    with `release`, they are held until it is set, `delay` being only the bound (a
    scenario that needs a request to come late releases it at the event it waits for,
    whatever the machine's speed)."""

    verb: str | None
    resource: str | None
    subresource: str | None
    status: int | None
    count: int
    delay: float
    skip: int = 0  # matching requests to let through untouched first
    release: threading.Event | None = None

    async def hold(self, stopping: asyncio.Event) -> None:
        """Wait `delay`, or until `release` is set, or the server stops (a hung request
        must not hold up the server's shutdown)."""
        await hold(self.delay, self.release, stopping)

    def matches(self, record: RecordedRequest) -> bool:
        hit = (
            self.count > 0
            and self.verb in (None, record.verb)
            and self.resource in (None, record.resource)
            and self.subresource in (None, record.subresource)
        )
        if hit and self.skip > 0:
            self.skip -= 1
            return False
        return hit


# The reason of an injected failure's Status, as the API server names these codes.
REASONS = {409: "Conflict", 500: "InternalError", 503: "ServiceUnavailable", 429: "TooManyRequests"}


def rbac_verb(request: rendering.Request) -> str:
    """The authorization verb of a request, as the API server's RequestInfo resolves it."""
    method = str(request.method.value).upper()
    if method == "GET":
        watch = request.params.get("watch") in ("true", "1")
        return "watch" if watch else "get" if request.name else "list"
    if method == "DELETE" and not request.name:
        return "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, method.lower())


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
