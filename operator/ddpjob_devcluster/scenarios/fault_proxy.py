"""A struggling API server in front of a real one: a reverse proxy that answers a share
of requests itself with 500/503/429 and cuts watch streams every few seconds, and passes
everything else through unchanged (`chaos.Chaos` decides).

It can also hold one request back (`SlowCreate`): the Nth create of a resource waits
before it is passed on, as one request of a burst often does on a loaded server. The
gang deadlock scenario uses it to make two gangs' Pods interleave deterministically: it
releases the held create once the other gang's Pods exist.

Clients talk plain HTTP to the proxy on 127.0.0.1 with their own credentials (a bearer
token is passed through), or with none where the proxy was given a client certificate
to present for them (`client`); the proxy talks TLS to kube-apiserver, verifying it with
the cluster's CA. So the real server still authenticates and authorizes every request
that gets through, and the faults are the only difference.

For the operator's tests it also keeps every resource request as RBAC sees it
(`requests`, `api_requests.RecordedRequest`), the body of each create (`created`), and
targeted faults (`inject_fault`: the next matching requests slow, or answered with an
error status, `api_requests.Fault`).
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import ssl
import threading
from dataclasses import dataclass
from typing import Any, Self

import aiohttp
import aiohttp.web

from ddpjob_devcluster.scenarios.api_requests import REASONS, Fault, Faults, RecordedRequest, hold, request_of
from ddpjob_devcluster.scenarios.chaos import MESSAGES, Chaos

HOP_HEADERS = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "host",
    "upgrade",
    "proxy-connection",
    "te",
    "trailer",
    "content-encoding",
}


@dataclass
class SlowCreate:
    """Creates of `resource` (a collection POST) after the first `skip` wait `delay` s, `count`
    of them; with `release`, until it is set (`delay` then only bounds the wait)."""

    resource: str
    delay: float
    skip: int = 0
    count: int = 1
    release: threading.Event | None = None

    def take(self, method: str, path: str) -> float:
        """The delay for this request (0: none); counts the matching ones."""
        if method != "POST" or not path.rstrip("/").endswith(f"/{self.resource}") or self.count <= 0:
            return 0.0
        if self.skip > 0:
            self.skip -= 1
            return 0.0
        self.count -= 1
        return self.delay


def status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    """A failure as kube-apiserver answers it: a v1 Status."""
    return {
        "apiVersion": "v1",
        "kind": "Status",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
        "metadata": {},
    }


class FaultProxy:
    """`start()` serves on `url`; `stop()` closes it. Counters: `chaos.failed`, `cut_watches`."""

    def __init__(
        self,
        upstream: str,
        ca: pathlib.Path,
        chaos: Chaos,
        slow: SlowCreate | None = None,
        client: tuple[pathlib.Path, pathlib.Path] | None = None,
        shutdown_grace: float = 2.0,
    ):
        """client: a certificate and key the proxy presents to kube-apiserver (its clients
        then send no credentials of their own). shutdown_grace: how long `stop()` lets open
        streams end on their own (a watch whose client is gone only notices at its next
        event)."""
        self.shutdown_grace = shutdown_grace
        self.upstream, self.chaos, self.slow = upstream.rstrip("/"), chaos, slow
        self.ssl = ssl.create_default_context(cafile=str(ca))
        if client is not None:
            self.ssl.load_cert_chain(str(client[0]), str(client[1]))
        self.cut_watches = 0
        self.requests: list[RecordedRequest] = []
        self.created: list[tuple[RecordedRequest, Any]] = []  # each create's request and its body
        self._faults = Faults()
        self._lock = threading.Lock()
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._runner: aiohttp.web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    def start(self) -> Self:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)

    def inject_fault(self, **fault: Any) -> Fault:
        """A fault for the next matching requests (`api_requests.Faults.add`'s fields)."""
        return self._faults.add(**fault)

    async def _start(self) -> None:
        self._session = aiohttp.ClientSession(auto_decompress=False)
        app = aiohttp.web.Application()
        app.router.add_route("*", "/{path:.*}", self._handle)
        # A watch passed through never ends on its own (no lifetime): at stop, give open
        # streams `shutdown_grace` instead of aiohttp's 60 s, then close them as a server
        # going away does.
        self._runner = runner = aiohttp.web.AppRunner(app, handle_signals=False, shutdown_timeout=self.shutdown_grace)
        await runner.setup()
        await aiohttp.web.TCPSite(runner, "127.0.0.1", 0).start()
        port = runner.addresses[0][1]  # the one site's (host, port)
        self.url = f"http://127.0.0.1:{port}"

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()
        # Streams still open (their clients gone) end here, not as "destroyed but pending".
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    async def _handle(self, request: aiohttp.web.Request) -> aiohttp.web.StreamResponse:
        record = request_of(request.method, request.path, request.query)
        data = await request.read()
        if record is not None:
            self.requests.append(record)
            if record.verb == "create":
                self.created.append((record, _json_or_none(data)))
            injected = self._faults.take(record)
            if injected is not None:
                await injected.hold()
                if injected.status is not None:
                    reason = REASONS.get(injected.status, "InjectedFault")
                    message = MESSAGES.get(injected.status, (reason, "injected fault"))[1]
                    body = status_body(injected.status, reason, message)
                    return aiohttp.web.json_response(body, status=injected.status)
        fault = self.chaos.fault()
        if fault is not None:
            code, reason, message = fault
            return aiohttp.web.json_response(
                status_body(code, reason, message), status=code, headers={"Retry-After": "1"} if code == 429 else None
            )
        delay = self.slow.take(request.method, request.path) if self.slow is not None else 0.0
        if delay and self.slow is not None:
            await hold(delay, self.slow.release)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        assert self._session is not None
        async with self._session.request(
            request.method,
            self.upstream + request.rel_url.raw_path_qs,
            headers=headers,
            data=data or None,
            ssl=self.ssl,
            timeout=aiohttp.ClientTimeout(total=None, sock_read=None),
        ) as upstream:
            response = aiohttp.web.StreamResponse(
                status=upstream.status,
                headers={
                    # The body goes through as the server sent it (not decompressed), so its
                    # Content-Encoding must too: kube-apiserver gzips large lists.
                    k: v
                    for k, v in upstream.headers.items()
                    if k.lower() not in HOP_HEADERS - {"content-encoding"}
                },
            )
            await response.prepare(request)
            watch = request.query.get("watch") in ("true", "1")
            lifetime = self.chaos.watch_seconds() if watch else None
            deadline = self._loop.time() + lifetime if lifetime else None
            # Where the stream may end cleanly: after a whole event (_finish_event). Only a
            # plain stream's events can be seen; an encoded one is cut where it stands.
            whole = "content-encoding" not in upstream.headers
            mid_event = False
            while True:
                timeout = None if deadline is None else max(0.0, deadline - self._loop.time())
                try:
                    chunk = await asyncio.wait_for(upstream.content.readany(), timeout)
                    if not chunk:
                        break
                    await response.write(chunk)
                    mid_event = not chunk.endswith(b"\n")
                except TimeoutError:
                    self.cut_watches += 1  # as a load balancer drops a long stream
                    if mid_event and whole:
                        await self._finish_event(upstream, response)
                    break
                except (aiohttp.ClientError, ConnectionError):
                    break  # either end went away (a stopped client, the server at shutdown)
            return response

    @staticmethod
    async def _finish_event(upstream: aiohttp.ClientResponse, response: aiohttp.web.StreamResponse) -> None:
        """Forward the rest of the event in flight, up to its newline. The cut then ends the
        stream between events, as kube-apiserver ends a watch at its timeout: a clean end
        after half an event is something no server sends (kopf would read the half as a
        whole line and fail to decode it). Bounded: an upstream that stalls mid-event is
        left as it is."""
        try:
            async with asyncio.timeout(5.0):
                while chunk := await upstream.content.readany():
                    end = chunk.find(b"\n")
                    await response.write(chunk if end < 0 else chunk[: end + 1])
                    if end >= 0:
                        return
        except (TimeoutError, aiohttp.ClientError, ConnectionError):
            return


def _json_or_none(data: bytes) -> Any:
    try:
        return json.loads(data) if data else None
    except (ValueError, RecursionError):  # a protobuf or YAML body, or one too deep for Python: not kept
        return None


def point_kubeconfig_at(path: pathlib.Path, url: str) -> None:
    """Send a kubeconfig's client through the proxy (plain HTTP: no CA)."""
    import yaml

    config = yaml.safe_load(path.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"] = {"server": url}
    path.write_text(yaml.safe_dump(config))


__all__ = ["FaultProxy", "SlowCreate", "point_kubeconfig_at"]
