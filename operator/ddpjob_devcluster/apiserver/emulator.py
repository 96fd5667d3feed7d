"""A Kubernetes API emulator for tests: kmock's `KubernetesEmulator`, made strict enough
for kopf, the official `kubernetes` client and `kubectl`.

kmock (pinned 0.8) provides the HTTP plumbing, URL -> (resource, namespace, name)
parsing, API discovery from a `resources` registry (with the bundled list of built-in
resources), Kubernetes `Status` error bodies and streaming of watch responses. Its stock
state handling is a naive dict merge, so this module overrides the emulator's serving
hooks (`_serve_list`, `_serve_create`, ...) with an API-server-like store
(`store_serving.py`): see `registry/store.py` for the object semantics. This module adds the server thread, the request
log and fault injection (`request_log.py`), the request decoding kmock does not do
(`request_body.py`), a linear dispatch (`reaction_dispatch.py`) and the few URL shapes
kmock cannot parse.
"""

from __future__ import annotations

import asyncio
import pathlib
import re
import threading
from typing import Any

import aiohttp.test_utils
import aiohttp.web
import attrs
import kmock
import yaml
from kmock._internal import enums, parsing, references, rendering

from ddpjob_devcluster.apiserver import pod_logs, request_body
from ddpjob_devcluster.apiserver.admission import Admission
from ddpjob_devcluster.apiserver.errors import ApiError
from ddpjob_devcluster.apiserver.reaction_dispatch import FastDispatch
from ddpjob_devcluster.apiserver.registry.served_resources import is_status_subresource
from ddpjob_devcluster.apiserver.registry.store import Store
from ddpjob_devcluster.apiserver.request_log import (
    REASONS,
    Fault,
    Faults,
    RecordedRequest,
    RequestLog,
    rbac_verb,
)
from ddpjob_devcluster.apiserver.store_serving import StoreServing

# kmock reads /api/v1/namespaces/X as "namespace X" and crashes on the bare list URL.
_NAMESPACES_PATH = re.compile(r"/api/v1/namespaces(?:/([^/]+)(?:/(status|finalize))?)?")
_NAMESPACES = references.resource(group="", version="v1", plural="namespaces")


@attrs.define(kw_only=True)
class KubeEmulator(RequestLog, FastDispatch, StoreServing, kmock.KubernetesEmulator):
    """An in-memory Kubernetes API server on 127.0.0.1, served from its own thread."""

    store: Store = attrs.field(init=False)
    admission: Admission = attrs.field(init=False)
    requests: list[RecordedRequest] = attrs.field(factory=list, init=False)
    _faults: Faults = attrs.field(factory=Faults, init=False)
    _url: str | None = attrs.field(default=None, init=False)
    _loop: asyncio.AbstractEventLoop | None = attrs.field(default=None, init=False)
    _thread: threading.Thread | None = attrs.field(default=None, init=False)
    _stopping: asyncio.Event | None = attrs.field(default=None, init=False)
    log_sources: list[Any] = attrs.field(factory=list, init=False)  # see pod_logs.py
    chaos: Any = attrs.field(default=None, init=False)  # a scenarios.chaos.Chaos: a struggling API server
    _stock: tuple[int, ...] = attrs.field(default=(), init=False)  # the reactions registered below
    _by_action: dict[Any, Any] = attrs.field(factory=dict, init=False)
    _ordered: tuple[tuple[int, ...], list[Any]] = attrs.field(default=((), []), init=False)

    def __attrs_post_init__(self) -> None:
        # Registers kmock's discovery endpoints and list/watch/get/create/patch/delete
        # fallbacks; the fallbacks call the overridden _serve_* methods below.
        super().__attrs_post_init__()
        self.resources.load_bundled()  # built-in kinds for discovery: pods, events, CRDs...
        self.store = Store(self.resources, self.objects)  # kmock keeps every version
        self.admission = Admission(self.store)  # what the API server checks before storing
        # kmock recognises no action for PUT or for DELETE on a collection.
        self.fallback[enums.method.PUT] << self._serve_replace
        self.fallback[enums.method.DELETE] << self._serve_delete_collection
        self._index_stock_reactions()

    # ---- lifecycle: a thread with its own event loop --------------------------------

    @property  # kmock's `url` is its managed server's yarl.URL; this emulator serves its own, a str
    def url(self) -> str:  # type: ignore[override]  # the clusters and tests take a str; kmock never reads it
        if self._url is None:
            raise RuntimeError("the emulator is not started")
        return self._url

    def start(self) -> KubeEmulator:
        ready = threading.Event()
        failure: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(ready, failure), name="kube-emulator", daemon=True)
        self._thread.start()
        ready.wait(timeout=30)
        if failure or self._url is None:
            raise RuntimeError("the emulator failed to start") from (failure[0] if failure else None)
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._thread = self._loop = None

    def __enter__(self) -> KubeEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self, ready: threading.Event, failure: list[BaseException]) -> None:
        try:
            asyncio.run(self._serve(ready))
        except BaseException as exc:  # noqa: BLE001 - the server thread's end, surfaced to start()
            failure.append(exc)
            ready.set()

    async def _serve(self, ready: threading.Event) -> None:
        self._loop = self.store.events.loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        # Not kmock.Server: it patches aiohttp's DNS resolver process-wide, which would also
        # touch kopf's client in this process and breaks when emulators stop out of order.
        server = aiohttp.test_utils.RawTestServer(self, host="127.0.0.1", port=0)
        async with self:  # kmock's stream machinery runs only inside its context
            await server.start_server()
            self._url = str(server.make_url("")).rstrip("/")
            ready.set()
            try:
                await self._stopping.wait()
            finally:
                self.store.close()  # ends open watch streams so aiohttp can shut down
                await server.close()

    def write_kubeconfig(self, path: str | pathlib.Path, *, namespace: str = "default") -> pathlib.Path:
        """A kubeconfig for kubectl/the kubernetes client: plain http, a dummy bearer token."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "emulator",
            "clusters": [{"name": "emulator", "cluster": {"server": self.url}}],
            "users": [{"name": "emulator", "user": {"token": "emulator-token"}}],
            "contexts": [
                {"name": "emulator", "context": {"cluster": "emulator", "user": "emulator", "namespace": namespace}}
            ],
        }
        path = pathlib.Path(path)
        path.write_text(yaml.safe_dump(config))
        return path

    # ---- request entry: parse, log, inject, dispatch ---------------------------------

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        if len(raw_request.path) > 1 and raw_request.path.endswith("/"):
            # The client asks for /apis/g/v/ at times; kmock's patterns want no trailing slash.
            raw_request = raw_request.clone(rel_url=request_body.with_path(raw_request, raw_request.path.rstrip("/")))
        match = _NAMESPACES_PATH.fullmatch(raw_request.path)
        if match is None:
            return await super().__call__(raw_request)
        # Parse a harmless path with kmock, then fix the result to the namespaces resource.
        clone = raw_request.clone(rel_url=request_body.with_path(raw_request, "/api/v1/_"))
        request = await rendering.Request._parse(clone, id=len(self._requests))
        name, sub = match.groups()
        path = parsing.ParsedPath("", "v1", "namespaces", None, name, sub)
        request = attrs.evolve(
            request,
            url=raw_request.url,
            resource=_NAMESPACES,
            namespace=None,
            name=name,
            subresource=sub,
            action=parsing.guess_k8s(path, request.method, dict(request.params)),
        )
        self._requests.append(request)
        try:
            return await self._handle(request)
        except Exception as exc:  # noqa: BLE001 - a handler's failure is its request's answer
            return await self._render_error(exc)

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        record = self._record(request)
        # chaos.py: a struggling server fails any request, discovery included (logged first).
        failure = self.chaos.fault() if self.chaos is not None else None
        if failure is not None:
            raise ApiError(*failure)
        if record is not None:
            fault = self._faults.take(record)
            if fault is not None:
                assert self._stopping is not None
                await fault.hold(self._stopping)
                if fault.status is not None:
                    raise ApiError(
                        fault.status,
                        REASONS.get(fault.status, "InjectedFault"),
                        f"injected fault for {record.verb} {record.resource}",
                    )
            if record.resource == "pods" and record.subresource == "log" and record.verb == "get":
                return await pod_logs.serve(self, request)
        # Skip KubernetesEmulator._handle: it mutates its naive store before dispatching.
        return await self._dispatch(request)

    async def _render_error(self, exc: Exception) -> aiohttp.web.StreamResponse:
        if isinstance(exc, ApiError):
            return aiohttp.web.json_response(exc.status_body(), status=exc.code)
        return await super()._render_error(exc)

    # ---- discovery, as kmock serves it, made strict (the store's hooks: store_serving.py) ----

    async def _serve_api(self, request: rendering.Request) -> rendering.Payload:
        # The official client's V1APIVersions model requires serverAddressByClientCIDRs.
        address = self.url.split("://", 1)[-1]
        doc = await super()._serve_api(request)
        if not isinstance(doc, dict):  # kmock's is a dict; anything else passes through
            return doc
        return dict(
            doc, apiVersion="v1", serverAddressByClientCIDRs=[{"clientCIDR": "0.0.0.0/0", "serverAddress": address}]
        )

    async def _serve_version(self, request: rendering.Request) -> rendering.Payload:
        # kmock says groupVersion "/v1" for the core group; kubectl's REST mapper needs "v1".
        doc = await super()._serve_version(request)
        if isinstance(doc, dict) and str(doc.get("groupVersion", "")).startswith("/"):
            doc["groupVersion"] = doc["groupVersion"][1:]
        return doc

    @property
    def stopping(self) -> bool:
        return self._stopping is None or self._stopping.is_set()


__all__ = ["ApiError", "Fault", "KubeEmulator", "RecordedRequest", "is_status_subresource", "rbac_verb"]
