"""A Kubernetes API emulator for tests: kmock's `KubernetesEmulator`, made strict enough
for kopf, the official `kubernetes` client and `kubectl`.

kmock (pinned 0.8) provides the HTTP plumbing, URL -> (resource, namespace, name)
parsing, API discovery from a `resources` registry (with the bundled list of built-in
resources), Kubernetes `Status` error bodies and streaming of watch responses. Its stock
state handling is a naive dict merge, so this module overrides the emulator's serving
hooks (`_serve_list`, `_serve_create`, ...) with an API-server-like store: see
`store.py` for the object semantics. This module adds the server thread,
the request log, fault injection and the few URL shapes kmock cannot parse.
"""
from __future__ import annotations

import asyncio
import json
import pathlib
import re
import threading
from collections.abc import AsyncIterator
from typing import Any, NamedTuple

import aiohttp.test_utils
import aiohttp.web
import attrs
import kmock
import yaml
from kmock._internal import apps, enums, filtering, parsing, references, rendering

from ddpjob_devcluster import apply as server_side_apply
from ddpjob_devcluster import logs as pod_logs
from ddpjob_devcluster import tables
from ddpjob_devcluster.admission import Admission
from ddpjob_devcluster.store import ApiError, Store, is_status_subresource


class RecordedRequest(NamedTuple):
    """One request as RBAC sees it: `verb` is the Kubernetes authorization verb."""
    verb: str
    group: str
    version: str
    resource: str
    subresource: str | None
    namespace: str | None
    name: str | None


WRITE_VERBS = frozenset({'create', 'update', 'patch', 'delete', 'deletecollection'})


@attrs.define
class Fault:
    """The next `count` requests matching verb/resource fail with `status` after `delay`."""
    verb: str | None
    resource: str | None
    subresource: str | None
    status: int | None
    count: int
    delay: float
    skip: int = 0  # matching requests to let through untouched first

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


# kmock reads /api/v1/namespaces/X as "namespace X" and crashes on the bare list URL.
_NAMESPACES_PATH = re.compile(r'/api/v1/namespaces(?:/([^/]+)(?:/(status|finalize))?)?')
_NAMESPACES = references.resource(group='', version='v1', plural='namespaces')

_REASONS = {409: 'Conflict', 500: 'InternalError', 503: 'ServiceUnavailable', 429: 'TooManyRequests'}


def rbac_verb(request: rendering.Request) -> str:
    """The authorization verb of a request, as the API server's RequestInfo resolves it."""
    method = str(request.method.value).upper()
    if method == 'GET':
        watch = request.params.get('watch') in ('true', '1')
        return 'watch' if watch else 'get' if request.name else 'list'
    if method == 'DELETE' and not request.name:
        return 'deletecollection'
    return {'POST': 'create', 'PUT': 'update', 'PATCH': 'patch', 'DELETE': 'delete'}.get(method, method.lower())


@attrs.define(kw_only=True)
class KubeEmulator(kmock.KubernetesEmulator):
    """An in-memory Kubernetes API server on 127.0.0.1, served from its own thread."""

    store: Store = attrs.field(init=False)
    admission: Admission = attrs.field(init=False)
    requests: list[RecordedRequest] = attrs.field(factory=list, init=False)
    _faults: list[Fault] = attrs.field(factory=list, init=False)
    _url: str | None = attrs.field(default=None, init=False)
    _loop: asyncio.AbstractEventLoop | None = attrs.field(default=None, init=False)
    _thread: threading.Thread | None = attrs.field(default=None, init=False)
    _stopping: asyncio.Event | None = attrs.field(default=None, init=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    log_sources: list[Any] = attrs.field(factory=list, init=False)  # see logs.py
    chaos: Any = attrs.field(default=None, init=False)  # a chaos.Chaos: a struggling API server
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
        # With only these reactions, a Kubernetes request is served by the one for its
        # action (list, watch, get, create, patch, delete): see _candidates.
        self._stock = tuple(map(id, self._payloads))
        for payload in self._payloads:
            criteria = getattr(payload._source, 'criteria', None)
            if isinstance(criteria, filtering.K8sCriteria) and criteria == filtering.K8sCriteria(action=criteria.action):
                self._by_action[criteria.action] = payload

    # ---- lifecycle: a thread with its own event loop --------------------------------

    @property
    def url(self) -> str:
        if self._url is None:
            raise RuntimeError('the emulator is not started')
        return self._url

    def start(self) -> KubeEmulator:
        ready = threading.Event()
        failure: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(ready, failure), name='kube-emulator', daemon=True)
        self._thread.start()
        ready.wait(timeout=30)
        if failure or self._url is None:
            raise RuntimeError('the emulator failed to start') from (failure[0] if failure else None)
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
        except BaseException as exc:  # surfaced to start() instead of dying silently
            failure.append(exc)
            ready.set()

    async def _serve(self, ready: threading.Event) -> None:
        self._loop = self.store.loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        # Not kmock.Server: it patches aiohttp's DNS resolver process-wide, which would also
        # touch kopf's client in this process and breaks when emulators stop out of order.
        server = aiohttp.test_utils.RawTestServer(self, host='127.0.0.1', port=0)
        async with self:  # kmock's stream machinery runs only inside its context
            await server.start_server()
            self._url = str(server.make_url('')).rstrip('/')
            ready.set()
            try:
                await self._stopping.wait()
            finally:
                self.store.close()  # ends open watch streams so aiohttp can shut down
                await server.close()

    def write_kubeconfig(self, path: str | pathlib.Path, *, namespace: str = 'default') -> pathlib.Path:
        """A kubeconfig for kubectl/the kubernetes client: plain http, a dummy bearer token."""
        config = {
            'apiVersion': 'v1', 'kind': 'Config', 'current-context': 'emulator',
            'clusters': [{'name': 'emulator', 'cluster': {'server': self.url}}],
            'users': [{'name': 'emulator', 'user': {'token': 'emulator-token'}}],
            'contexts': [{'name': 'emulator', 'context': {
                'cluster': 'emulator', 'user': 'emulator', 'namespace': namespace}}],
        }
        path = pathlib.Path(path)
        path.write_text(yaml.safe_dump(config))
        return path

    # ---- request log and fault injection ---------------------------------------------

    def writes(self, resource: str | None = None) -> int:
        """How many create/update/patch/delete requests were made (optionally for one plural)."""
        return sum(1 for r in list(self.requests)
                   if r.verb in WRITE_VERBS and resource in (None, r.resource))

    def inject_fault(self, *, verb: str | None = None, resource: str | None = None,
                     subresource: str | None = None, status: int | None = 500,
                     count: int = 1, delay: float = 0.0, skip: int = 0) -> Fault:
        """Make the next `count` matching requests (after `skip` of them) wait `delay`
        seconds, then fail with `status` (or, with status=None, proceed normally: a slow
        API server)."""
        fault = Fault(verb, resource, subresource, status, count, delay, skip)
        with self._lock:
            self._faults.append(fault)
        return fault

    def _take_fault(self, record: RecordedRequest) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.matches(record):
                    fault.count -= 1
                    return fault
        return None

    # ---- request entry: parse, log, inject, dispatch ---------------------------------

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        if len(raw_request.path) > 1 and raw_request.path.endswith('/'):
            # The client asks for /apis/g/v/ at times; kmock's patterns want no trailing slash.
            raw_request = raw_request.clone(rel_url=_with_path(raw_request, raw_request.path.rstrip('/')))
        match = _NAMESPACES_PATH.fullmatch(raw_request.path)
        if match is None:
            return await super().__call__(raw_request)
        # Parse a harmless path with kmock, then fix the result to the namespaces resource.
        clone = raw_request.clone(rel_url=_with_path(raw_request, '/api/v1/_'))
        request = await rendering.Request._parse(clone, id=len(self._requests))
        name, sub = match.groups()
        path = parsing.ParsedPath('', 'v1', 'namespaces', None, name, sub)
        request = attrs.evolve(
            request, url=raw_request.url, resource=_NAMESPACES, namespace=None, name=name, subresource=sub,
            action=parsing.guess_k8s(path, request.method, dict(request.params)))
        self._requests.append(request)
        try:
            return await self._handle(request)
        except Exception as exc:
            return await self._render_error(exc)

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        if request.resource is not None and request.resource.plural:
            record = RecordedRequest(
                rbac_verb(request), request.resource.group or '', request.resource.version or '',
                request.resource.plural, request.subresource, request.namespace, request.name)
            self.requests.append(record)
        # chaos.py: a struggling server fails any request, discovery included (logged first).
        failure = self.chaos.fault() if self.chaos is not None else None
        if failure is not None:
            raise ApiError(*failure)
        if request.resource is not None and request.resource.plural:
            fault = self._take_fault(record)
            if fault is not None:
                await self._sleep_unless_stopping(fault.delay)
                if fault.status is not None:
                    raise ApiError(fault.status, _REASONS.get(fault.status, 'InjectedFault'),
                                   f'injected fault for {record.verb} {record.resource}')
            if record.resource == 'pods' and record.subresource == 'log' and record.verb == 'get':
                return await pod_logs.serve(self, request)
        # Skip KubernetesEmulator._handle: it mutates its naive store before dispatching.
        return await self._dispatch(request)

    async def _dispatch(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        """kmock's RawHandler._handle, with the "does this reaction see the request" check
        made against the request alone.

        kmock answers `request in reaction._source` by filtering its whole request history
        until it meets this request: O(history) per reaction per request, quadratic over a
        run (260 ms per create after ~1,200 requests, so a benchmark of thousands of objects
        never ends). Membership of one request depends only on that request (the emulator
        and its tests use no history-slicing reactions), so for the synchronous check the
        root's history is swapped for just this request; the full history is kept.
        """
        candidates = self._candidates(request)
        for payload in candidates + [p for p in self._in_order() if all(p is not c for c in candidates)]:
            if self._sees(payload, request) and not payload._disabled.is_set():
                try:
                    return await payload(request)
                except rendering.ReactionMismatchError:  # either mismatch or depletion
                    payload._disabled.set()
                except NotImplementedError:  # matched, but nothing to respond with
                    pass
        raise NotImplementedError('no reaction matches the request')

    def _in_order(self) -> list[Any]:
        """The reactions in kmock's order (highest priority first), sorted once per set
        of reactions rather than per request."""
        ids = tuple(map(id, self._payloads))
        if self._ordered[0] != ids:
            priorities = [payload.priorities for payload in self._payloads]
            width = max((len(priority) for priority in priorities), default=0)
            keys = [tuple(-p for p in priority) + (0,) * (width - len(priority)) for priority in priorities]
            order = sorted(range(len(keys)), key=keys.__getitem__)
            self._ordered = (ids, [self._payloads[index] for index in order])
        return self._ordered[1]

    def _candidates(self, request: rendering.Request) -> list[Any]:
        """The reaction to try first. While only the emulator's own reactions exist, a
        request for a resource is answered by its action's (the discovery reactions
        before it match paths of one or two segments under /api or /apis, which name no
        resource): one filter check instead of up to a dozen, which was a third of the
        emulator's time per Pod create. Tests that add reactions get kmock's full order."""
        if request.resource is None or not request.resource.plural or tuple(map(id, self._payloads)) != self._stock:
            return []
        payload = self._by_action.get(request.action)
        return [payload] if payload is not None else []

    def _sees(self, payload: Any, request: rendering.Request) -> bool:
        history = self._requests
        self._requests = [request]  # no await in between: no other request can interleave
        try:
            return request in payload._source
        finally:
            self._requests = history

    async def _sleep_unless_stopping(self, delay: float) -> None:
        # A hung request must not hold up the server's shutdown.
        assert self._stopping is not None
        try:
            await asyncio.wait_for(self._stopping.wait(), delay)
        except asyncio.TimeoutError:
            pass

    async def _render_error(self, exc: Exception) -> aiohttp.web.StreamResponse:
        if isinstance(exc, ApiError):
            return aiohttp.web.json_response(exc.status_body(), status=exc.code)
        return await super()._render_error(exc)

    # ---- serving hooks called by kmock's fallbacks ------------------------------------

    async def _serve_api(self, request: rendering.Request) -> rendering.Payload:
        # The official client's V1APIVersions model requires serverAddressByClientCIDRs.
        address = self.url.split('://', 1)[-1]
        return dict(await super()._serve_api(request), apiVersion='v1',
                    serverAddressByClientCIDRs=[{'clientCIDR': '0.0.0.0/0', 'serverAddress': address}])

    async def _serve_version(self, request: rendering.Request) -> rendering.Payload:
        # kmock says groupVersion "/v1" for the core group; kubectl's REST mapper needs "v1".
        doc = await super()._serve_version(request)
        if isinstance(doc, dict) and str(doc.get('groupVersion', '')).startswith('/'):
            doc['groupVersion'] = doc['groupVersion'][1:]
        return doc

    @property
    def stopping(self) -> bool:
        return self._stopping is None or self._stopping.is_set()

    async def _serve_list(self, request: rendering.Request) -> rendering.Payload:
        return tables.maybe_table(self.store, request,
                                  self.store.list(request.resource, request.namespace, request.params))

    async def _serve_fetch(self, request: rendering.Request) -> rendering.Payload:
        return tables.maybe_table(self.store, request,
                                  self.store.get(request.resource, request.namespace, request.name))

    async def _serve_create(self, request: rendering.Request) -> rendering.Payload:
        if request.subresource:  # e.g. pods/eviction, pods/binding: not emulated
            raise ApiError(404, 'NotFound', f'subresource {request.subresource} is not emulated')
        body = _body(request)
        if request.resource is not None and request.resource.plural == 'pods' and not request.resource.group:
            _quantities_as_strings(body)
        body = self.admission.create(request.resource, request.namespace, body, request.params)
        obj = self.store.create(request.resource, request.namespace, body, _dry_run(request))
        self._pods_changed(request)
        return rendering.Response(status=201, payload=obj)

    def _pods_changed(self, request: rendering.Request) -> None:
        if request.resource is not None and request.resource.plural in ('pods', 'resourcequotas'):
            self.admission.pods_changed(request.namespace)

    async def _serve_replace(self, request: rendering.Request) -> rendering.Payload:
        _require_name(request)
        return self.store.replace(request.resource, request.namespace, request.name,
                                  request.subresource, _body(request), admit=self._admit_update(request))

    async def _serve_update(self, request: rendering.Request) -> rendering.Payload:
        _require_name(request)
        content_type = request.headers.get('Content-Type', '').split(';')[0].strip()
        if content_type in server_side_apply.APPLY_TYPES:
            # Admission as for any create or update (an apply is one or the other).
            applied = server_side_apply.apply(
                self.store, request.resource, request.namespace, request.name, request.subresource,
                _body(request), request.params, admit=self._admit_update(request),
                admit_create=lambda body: self.admission.create(request.resource, request.namespace, body,
                                                                request.params))
            self._pods_changed(request)
            return applied
        patched = self.store.patch(request.resource, request.namespace, request.name,
                                   request.subresource, content_type, _body(request),
                                   admit=self._admit_update(request))
        if request.subresource != 'status' or request.resource.plural == 'pods':  # not our own quota writes
            self._pods_changed(request)
        return patched

    def _admit_update(self, request: rendering.Request) -> Any:
        return lambda current, new: self.admission.update(request.resource, current, new, request.subresource,
                                                          request.params)

    async def _serve_delete(self, request: rendering.Request) -> rendering.Payload:
        deleted = self.store.delete(request.resource, request.namespace, request.name, _propagation(request),
                                    *_grace_and_uid(request))
        self._pods_changed(request)
        return deleted

    async def _serve_delete_collection(self, request: rendering.Request) -> rendering.Payload:
        if request.resource is None or request.name:
            raise ApiError(405, 'MethodNotAllowed', 'DELETE is not allowed here')
        return self.store.delete_collection(request.resource, request.namespace, request.params,
                                            _propagation(request))

    async def _serve_watch(self, request: rendering.Request) -> AsyncIterator[rendering.Payload]:
        yield b''  # send the headers now: a quiet watch is still a started stream
        as_table = tables.WatchTables(self.store, request)
        events = self.store.watch(request.resource, request.namespace, request.name, request.params)
        if self.chaos is not None:
            events = self.chaos.limit(events)
        async for event in events:
            yield as_table(event)

    # ---- thread-safe snapshots for assertions -----------------------------------------

    def get_object(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The stored object (a deep copy), or None; resource like 'v1/pods' or 'ddpjob.io/v1alpha1/ddpjobs'."""
        return self.store.peek(references.resource(resource), namespace, name)

    def list_objects(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.store.peek_all(references.resource(resource), namespace)


def _quantities_as_strings(pod: Any) -> None:
    """The API server decodes `resources` into resource.Quantity and always returns a
    string (`nvidia.com/gpu: 1` is stored and read back as "1"); clients' models insist on it."""
    spec = pod.get('spec') if isinstance(pod, dict) else None
    for container in (spec or {}).get('containers') or []:
        for values in ((container.get('resources') or {}).get(k) for k in ('limits', 'requests')):
            for key, qty in (values or {}).items():
                if isinstance(qty, (int, float)) and not isinstance(qty, bool):
                    values[key] = str(qty)


def _with_path(raw_request: aiohttp.web.BaseRequest, path: str) -> Any:
    # yarl's with_path() drops the query string (?watch=true...), so put it back.
    return raw_request.rel_url.with_path(path).with_query(raw_request.rel_url.query)


def _body(request: rendering.Request) -> Any:
    if request.data is not None:
        return request.data
    if request.text.strip():
        try:
            return json.loads(request.text)
        except ValueError:
            return yaml.safe_load(request.text)
    return {}


def _require_name(request: rendering.Request) -> None:
    if not request.name:
        raise ApiError(405, 'MethodNotAllowed', f'{request.method} needs an object name')


def _dry_run(request: rendering.Request) -> bool:
    return bool(request.params.get('dryRun'))


def _delete_options(request: rendering.Request) -> dict:
    """DeleteOptions come from the body when there is one, and then the query is ignored;
    from the query only without a body (apiserver handlers/delete.go: the body is decoded,
    else the query parameters). A client that sends gracePeriodSeconds=0 as a query
    parameter beside a body gets the default grace on a real server."""
    if isinstance(request.data, dict) and request.data:
        return request.data
    return dict(request.params)


def _grace_and_uid(request: rendering.Request) -> tuple[int | None, str | None]:
    """DeleteOptions' gracePeriodSeconds and preconditions.uid."""
    options = _delete_options(request)
    grace = options.get('gracePeriodSeconds')
    uid = (options.get('preconditions') or {}).get('uid') if isinstance(options.get('preconditions'), dict) else None
    return (int(grace) if grace is not None else None), uid


def _propagation(request: rendering.Request) -> str | None:
    return _delete_options(request).get('propagationPolicy')


__all__ = ['KubeEmulator', 'RecordedRequest', 'Fault', 'ApiError', 'is_status_subresource', 'rbac_verb']
