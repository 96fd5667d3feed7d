"""The one module of the operator that talks to the Kubernetes API.

It rides on aiohttp (kopf's own HTTP library: one pooled session, TLS, the credentials
of `connection.py`), so requests wait on kopf's event loop. The alternatives were measured
(docs/benchmarks.md): the synchronous official client in a thread pool was slower (64
threads contending for the GIL starve the event loop that processes kopf's watch events;
`benchmarks/kube_threads.py` keeps it for that comparison), and `kubernetes_asyncio`, which
the operator used before, sent the same requests through the same aiohttp with 48 MB of
generated API classes and models around them. Responses are read as JSON dicts, not
client models: the controller works on plain objects, and building a `V1Pod` model per
Pod would cost more than the request.

One request travels through `transport.py`, which this
module wraps with retries, typed errors and a cap on requests in flight; the paths it is
given come from `api_paths.py`.

Credentials are whatever kopf's login produced (`connect(info)`, see handlers.py), so
kopf's watches and these writes share one source: a kubeconfig, the in-cluster service
account, or a test's control plane.

Errors are typed (`APIError` and its subclasses, with the HTTP `status`, the Status
`reason` and `message`). Transient ones (no answer, 429, 5xx) are retried here a few
times with capped, jittered exponential backoff (429's Retry-After honoured); what still
fails is raised and the caller's reconcile is retried by its work queue, forever.

Every write is idempotent: create tolerates 409 AlreadyExists (and reads what is there
instead), delete tolerates 404, and status patches carry the resourceVersion the status
was computed from, so a second operator (a leader hand-over) can never be overwritten.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp

from ddpjob.backoff import Backoff
from ddpjob.operator import connection
from ddpjob.operator.api_paths import collection_path, job_path
from ddpjob.operator.transport import DEFAULT_TIMEOUT, HttpTransport, Transport

logger = logging.getLogger("ddpjob.operator.kube")

# 64 requests in flight keep the API server (and the process' file descriptors)
# comfortable and still saturate one API server.
DEFAULT_MAX_IN_FLIGHT = 64
# Attempts of one request before its error goes to the caller (whose reconcile retries).
DEFAULT_ATTEMPTS = 4
TRANSIENT = frozenset({0, 429, 500, 502, 503, 504})

_MERGE_PATCH = "application/merge-patch+json"


class APIError(Exception):
    """An API request failed: `status` is the HTTP code (0: no answer), `reason` the
    Status reason (NotFound, AlreadyExists, Conflict, Forbidden, Invalid, ...)."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        details: Mapping[str, Any] | None = None,
        body: Mapping[str, Any] | None = None,
    ):
        super().__init__(f"{status} {reason}: {message}")
        self.status, self.reason, self.message = int(status), reason or "", message or ""
        self.details: dict[str, Any] = dict(details or {})  # the Status' details (e.g. causes)
        self.body = dict(body or {})  # the whole Status answer

    @property
    def transient(self) -> bool:
        return self.status in TRANSIENT


class NotFound(APIError):
    pass


class Conflict(APIError):
    """409: AlreadyExists on create, Conflict on a stale resourceVersion."""


class Forbidden(APIError):
    pass


class Invalid(APIError):
    pass


_BY_STATUS: dict[int, type[APIError]] = {403: Forbidden, 404: NotFound, 409: Conflict, 422: Invalid}


def error_from_response(status: int, data: bytes | str | None, http_reason: str = "") -> APIError:
    """The typed error of an API answer, from its `Status` body when it has one."""
    body: Any = None
    with contextlib.suppress(ValueError):
        body = json.loads(data) if data else None
    if not isinstance(body, dict):
        body = {}
    reason = str(body.get("reason") or http_reason or "Unknown")
    message = str(body.get("message") or (data.decode(errors="replace") if isinstance(data, bytes) else data) or reason)
    return _BY_STATUS.get(status, APIError)(status, reason, message, body.get("details") or None, body)


# The loop keeps only weak references to tasks: these hold the closes until they finish.
_closing: set[asyncio.Future[None]] = set()


def _close_soon(transport: Transport) -> None:
    task = asyncio.ensure_future(transport.aclose())
    _closing.add(task)
    task.add_done_callback(_closing.discard)


class Kube:
    """Thin async calls. `connect(info)` (kopf's ConnectionInfo) before the first call;
    a call made earlier waits for it."""

    def __init__(
        self,
        transport: Transport | None = None,
        *,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        attempts: int = DEFAULT_ATTEMPTS,
        backoff: Backoff = Backoff(base=0.05, cap=2.0),
    ):
        self.max_in_flight, self.attempts, self.backoff = max_in_flight, attempts, backoff
        self._transport: Transport | None = None
        self._ready: asyncio.Event | None = None
        self._slots: asyncio.Semaphore | None = None
        self.failing_since: float | None = None  # monotonic time of the first failure of an outage
        # Called before each request is sent: an elected leader's check that it still
        # leads (main.py), which ends the process once it does not, so no write leaves a
        # replica that a blocked event loop kept from noticing it had lost the Lease.
        self.guard: Callable[[], None] | None = None
        self._closing: Any = None
        if transport is not None:
            self.use(transport)

    def connect(self, info: Any) -> None:
        """(Re)build the client from kopf's ConnectionInfo (on the event loop)."""
        self.use(HttpTransport(connection.configuration(info, pool_size=self.max_in_flight), self.max_in_flight))

    def use(self, transport: Transport) -> None:
        old, self._transport = self._transport, transport
        self._event().set()
        if old is not None:  # re-authentication: calls in flight finish on the old session
            self._closing = asyncio.get_running_loop().call_later(DEFAULT_TIMEOUT[1], _close_soon, old)

    async def aclose(self) -> None:
        if self._transport is not None:
            await self._transport.aclose()
            self._transport = None

    def outage_seconds(self) -> float:
        """How long every request has been failing for lack of an answer (0: healthy)."""
        return 0.0 if self.failing_since is None else time.monotonic() - self.failing_since

    def _event(self) -> asyncio.Event:
        if self._ready is None:
            self._ready = asyncio.Event()
        return self._ready

    async def _request(
        self, method: str, path: str, body: Any = None, content_type: str | None = None
    ) -> dict[str, Any]:
        if self._transport is None:
            await self._event().wait()
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_in_flight)
        headers = {"Content-Type": content_type} if content_type else {}
        attempt = 0
        while True:
            attempt += 1
            retry_after = None
            try:
                async with self._slots:
                    assert self._transport is not None
                    if self.guard is not None:
                        self.guard()
                    status, data, response_headers = await self._transport.request(method, path, body, dict(headers))
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                error: APIError = APIError(0, "ConnectionError", f"{method} {path}: {exc}")
            else:
                if 200 <= status < 300:
                    self.failing_since = None
                    return json.loads(data) if data else {}
                error = error_from_response(status, data)
                retry_after = (response_headers or {}).get("Retry-After")
            if not error.transient:
                self.failing_since = None  # the server answered: it is up
                raise error
            if self.failing_since is None:
                self.failing_since = time.monotonic()
            if attempt >= self.attempts:
                raise error
            delay = self.backoff.delay(attempt)
            if retry_after:
                with contextlib.suppress(ValueError):
                    delay = max(delay, min(float(retry_after), self.backoff.cap * 5))
            logger.debug("%s %s failed (%s), retry %d in %.2fs", method, path, error, attempt, delay)
            await asyncio.sleep(delay)

    async def get(self, url: str) -> dict[str, Any]:
        return await self._request("GET", url)

    async def served(self, url: str) -> bool:
        """Whether API discovery knows `url` (e.g. /apis/scheduling.volcano.sh/v1beta1)."""
        try:
            await self.get(url)
            return True
        except NotFound:
            return False

    async def create(self, obj: Mapping[str, Any], read_existing: bool = True) -> tuple[dict[str, Any] | None, bool]:
        """Create `obj` unless it exists. Returns (the object, whether this call created it).

        A 409 is success: an earlier attempt whose answer was lost, or another replica.
        With `read_existing`, what is there is read back, so the caller sees the truth
        (it may be an older object with the same name) rather than what it asked for."""
        url = collection_path(obj)
        try:
            return await self._request("POST", url, dict(obj)), True
        except Conflict:
            if not read_existing:
                return None, False
            return await self.get(f"{url}/{obj['metadata']['name']}"), False

    async def post(self, url: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create `obj` in the collection at `url`; `Conflict` when it exists (a caller
        that must know who made it, as an election does, cannot treat 409 as success)."""
        return await self._request("POST", url, dict(obj))

    async def replace(self, url: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        """PUT the whole object. Its metadata.resourceVersion makes the write apply only
        over that version (optimistic concurrency): `Conflict` otherwise."""
        return await self._request("PUT", url, dict(obj))

    async def delete(
        self, url: str, *, uid: str | None = None, propagation: str = "Background", grace_period: int | None = None
    ) -> bool:
        """Delete; False when it was already gone. `uid` makes it a precondition, so an
        object recreated under the same name is never deleted by mistake. `grace_period=0`
        is a force delete (for a Pod whose kubelet can no longer confirm)."""
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        if grace_period is not None:
            options["gracePeriodSeconds"] = grace_period
        if uid:
            options["preconditions"] = {"uid": uid}
        try:
            await self._request("DELETE", url, options)
            return True
        except NotFound:
            return False
        except Conflict:
            return False  # the uid precondition failed: that object is not ours to delete

    async def patch_status(
        self, namespace: str, name: str, patch: Mapping[str, Any], resource_version: str | None = None
    ) -> dict[str, Any]:
        """JSON merge patch of the DDPJob's status subresource; `None` values remove keys.

        With `resource_version`, the API server applies it only to that version of the
        object (optimistic concurrency) and answers `Conflict` otherwise."""
        body: dict[str, Any] = {"status": dict(patch)}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        return await self._request("PATCH", f"{job_path(namespace, name)}/status", body, _MERGE_PATCH)
