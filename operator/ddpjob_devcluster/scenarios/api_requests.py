"""Requests to a Kubernetes API server as RBAC sees them, and the faults a test puts in
their way, for the fault proxy in front of the real kube-apiserver (`fault_proxy.py`).

`request_of(method, path, query)` resolves an HTTP request the way kube-apiserver's
RequestInfoFactory does (staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go):
the authorization verb (get/list/watch/create/update/patch/delete/deletecollection), the
group, version, resource, subresource, namespace and name; discovery and other
non-resource paths are not resource requests (None).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import urllib.parse
from collections.abc import Mapping
from typing import NamedTuple

import attrs


class RecordedRequest(NamedTuple):
    """One request as RBAC sees it: `verb` is the Kubernetes authorization verb."""

    verb: str
    group: str
    version: str
    resource: str
    subresource: str | None
    namespace: str | None
    name: str | None


def authorization_verb(method: str, name: str | None, watch: bool) -> str:
    """The verb RBAC checks for an HTTP method on a collection or a named object."""
    method = method.upper()
    if method == "GET":
        return "watch" if watch else "get" if name else "list"
    if method == "DELETE" and not name:
        return "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, method.lower())


def request_of(method: str, path: str, query: Mapping[str, str]) -> RecordedRequest | None:
    """The resource request of an HTTP request to kube-apiserver (None: not one)."""
    parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 2:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None  # /version, /openapi, /api, /apis, a group's discovery
    watch = query.get("watch") in ("true", "1")
    if rest[:1] == ["watch"]:  # the deprecated /watch/ paths
        watch, rest = True, rest[1:]
    namespace = None
    if rest[:1] == ["namespaces"] and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2:  # a namespaced resource; else the Namespace object itself
            rest = rest[2:]
    if not rest:
        return None
    resource, name, subresource = rest[0], rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None
    return RecordedRequest(
        authorization_verb(method, name, watch), group, version, resource, subresource, namespace, name
    )


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

    async def hold(self, stopping: asyncio.Event | None = None) -> None:
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


class Faults:
    """The faults a test injected, each taken by the requests it matches (the fault
    proxy's). Thread-safe: a test adds from its thread while the server takes
    them on its own loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []

    def add(
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
        (or, with status=None, go through: a slow API server)."""
        fault = Fault(verb, resource, subresource, status, count, delay, skip, release)
        with self._lock:
            self._faults.append(fault)
        return fault

    def take(self, record: RecordedRequest) -> Fault | None:
        """The first fault this request matches, one of its `count` used up; None for none."""
        with self._lock:
            for fault in self._faults:
                if fault.matches(record):
                    fault.count -= 1
                    return fault
        return None


# The reason of an injected failure's Status, as the API server names these codes.
REASONS = {409: "Conflict", 500: "InternalError", 503: "ServiceUnavailable", 429: "TooManyRequests"}
