"""The object semantics of the emulated API server: what a real kube-apiserver (with the
garbage collector) does to objects, kept only as deep as operators and their tests need.

Objects live in kmock's `ObjectsArray` (so `emulator.objects[...]` keeps every version
for assertions); this module adds uid/resourceVersion/generation, optimistic concurrency,
the status subresource, finalizers, ownerReference garbage collection, CRD discovery and
a resourceVersion-ordered event log that watches replay from.
"""
from __future__ import annotations

import asyncio
import datetime
import secrets
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import jsonpatch
from kmock import ObjectsArray, ResourceInfo, ResourcesArray, resource as Resource

from ddpjob_devcluster import garbage_collector, object_meta
from ddpjob_devcluster.graceful import PODS, graceful_delete
from ddpjob_devcluster.plaindata import fresh
from ddpjob_devcluster.selectors import SelectorError, labels_of, parse_field_selector, parse_label_selector

Key = tuple[Resource, str | None, str]
Admit = Callable[[Mapping[str, Any], dict[str, Any]], dict[str, Any]]
ALL_VERBS = {'create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'}
CRDS = Resource(group='apiextensions.k8s.io', version='v1', plural='customresourcedefinitions')
NAMESPACES = Resource(group='', version='v1', plural='namespaces')
# Fields the server owns: a client's PUT/PATCH cannot change them.
SERVER_OWNED_META = ('uid', 'creationTimestamp', 'deletionTimestamp', 'deletionGracePeriodSeconds',
                     'generation', 'namespace', 'name', 'resourceVersion')


class ApiError(Exception):
    """An error the server answers with a Kubernetes `Status` body."""

    def __init__(self, code: int, reason: str, message: str, details: Mapping[str, Any] | None = None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, dict(details or {})

    def status_body(self) -> dict[str, Any]:
        return {'apiVersion': 'v1', 'kind': 'Status', 'metadata': {}, 'status': 'Failure',
                'code': self.code, 'reason': self.reason, 'message': self.message, 'details': self.details}


def _decodable(body: Any) -> None:
    try:
        object_meta.check(body)
    except object_meta.DecodeError as exc:
        raise ApiError(400, 'BadRequest', str(exc)) from None


def is_status_subresource(info: ResourceInfo) -> bool:
    return 'status' in info.subresources


def _now() -> str:
    return datetime.datetime.now(tz=datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')


def _api_version(res: Resource) -> str:
    return f'{res.group}/{res.version}' if res.group else str(res.version)


def _spec_part(obj: Mapping[str, Any]) -> dict[str, Any]:
    # Generation tracks the desired state: everything but metadata and status.
    return {k: v for k, v in obj.items() if k not in ('metadata', 'status', 'apiVersion', 'kind')}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (also used for strategic merge patch, see the module quirks)."""
    if not isinstance(patch, dict):
        return fresh(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class Store:
    def __init__(self, resources: ResourcesArray, objects: ObjectsArray | None = None):
        self.resources = resources
        self.objects = objects if objects is not None else ObjectsArray()
        # Keys by resource, in creation order: selecting one kind must not scan every
        # object of every kind (quota admission lists a namespace's quotas per Pod create).
        self._keys: dict[Resource, dict[Key, None]] = {}
        # (apiVersion, kind) -> resource: found ones only, cleared when a CRD is (un)served
        # (resources are otherwise only added, at start).
        self._by_kind: dict[tuple[str, str], Resource] = {}
        self._rv = 0
        self._log: list[tuple[int, Resource, dict[str, Any]]] = []  # (rv, resource, watch event)
        self._lock = threading.RLock()  # tests peek from their own thread
        self._changed = asyncio.Event()
        self._closed = False
        self.loop: asyncio.AbstractEventLoop | None = None  # the serving loop, set by the emulator
        self._create(NAMESPACES, None, {'metadata': {'name': 'default'}})

    # ---- reads ----

    def get(self, res: Resource, namespace: str | None, name: str) -> dict[str, Any]:
        with self._lock:
            self._info(res)
            return fresh(self._live(self._key(res, namespace, name)))

    def list(self, res: Resource, namespace: str | None, params: Mapping[str, str]) -> dict[str, Any]:
        with self._lock:
            info = self._info(res)
            items = self._select(res, namespace, params)
            return {'apiVersion': _api_version(res), 'kind': f'{info.kind}List',
                    'metadata': {'resourceVersion': str(self._rv)}, 'items': fresh(items)}

    def peek(self, res: Resource, namespace: str | None, name: str) -> dict[str, Any] | None:
        with self._lock:
            key = (res, namespace, name)
            live = key in self.objects and not self.objects[key].deleted
            return fresh(self.objects[key].raw) if live else None

    def view(self, res: Resource, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The stored object itself (see `view_all`), or None."""
        with self._lock:
            key = (res, namespace, name)
            return self.objects[key].raw if key in self.objects and not self.objects[key].deleted else None

    def peek_all(self, res: Resource, namespace: str | None) -> list[dict[str, Any]]:
        with self._lock:
            return fresh(self._select(res, namespace, {}))

    def view_all(self, res: Resource, namespace: str | None) -> list[dict[str, Any]]:
        """The stored objects themselves, for readers inside the dev cluster (admission,
        scheduler): no copy, because a write stores a new dict and never changes a stored
        one. Callers must not mutate them. Copying every Pod on every Pod create made
        admission O(Pods) deep copies per request."""
        with self._lock:
            return self._select(res, namespace, {})

    def _select(self, res: Resource, namespace: str | None, params: Mapping[str, str]) -> list[dict[str, Any]]:
        matches = _matcher(params, res)
        objects = self.objects
        return [obj.raw for key in self._keys.get(res, ()) if namespace in (None, key[1])
                and not (obj := objects[key]).deleted and matches(obj.raw)]

    # ---- writes ----

    def create(self, res: Resource, namespace: str | None, body: Any, dry_run: bool = False) -> dict[str, Any]:
        with self._lock:
            return self._create(res, namespace, body, dry_run)

    def replace(self, res: Resource, namespace: str | None, name: str, sub: str | None, body: Any,
                admit: Admit | None = None) -> dict[str, Any]:
        """`admit(current, new)` returns what to store or raises the refusal (admission)."""
        with self._lock:
            key = self._key(res, namespace, name)
            current = self._live(key)
            _require_object(body)
            _decodable(body)
            if (body.get('metadata') or {}).get('name', name) != name:
                raise ApiError(400, 'BadRequest', 'the name of the object does not match the URL')
            self._check_resource_version(body, current)
            new = self._apply_write(res, current, body, sub)
            return self._commit(key, current, admit(current, new) if admit else new)

    def patch(self, res: Resource, namespace: str | None, name: str, sub: str | None,
              content_type: str, body: Any, admit: Admit | None = None) -> dict[str, Any]:
        with self._lock:
            key = self._key(res, namespace, name)
            current = self._live(key)
            patched = _apply_patch(current, content_type, body)
            # A patch that carries (or json-patches) a resourceVersion is a precondition.
            self._check_resource_version(patched, current)
            new = self._apply_write(res, current, patched, sub)
            return self._commit(key, current, admit(current, new) if admit else new)

    def delete(self, res: Resource, namespace: str | None, name: str, propagation: str | None,
               grace_period: int | None = None, uid: str | None = None) -> dict[str, Any]:
        with self._lock:
            key = self._key(res, namespace, name)
            if uid is not None and self._live(key)['metadata']['uid'] != uid:
                # rest.BeforeDelete (apiserver/pkg/registry/rest/delete.go): the Kind, not the resource.
                kind = self._info(res).kind
                raise ApiError(409, 'Conflict', f'Operation cannot be fulfilled on {kind} "{name}": the UID in the '
                               f'precondition ({uid}) does not match the UID in record '
                               f'({self._live(key)["metadata"]["uid"]}). The object might have been deleted and '
                               'then recreated', {'name': name, 'kind': kind})
            return self._delete(key, propagation, grace_period)

    def delete_collection(self, res: Resource, namespace: str | None, params: Mapping[str, str],
                          propagation: str | None) -> dict[str, Any]:
        with self._lock:
            info = self._info(res)
            names = [(obj['metadata'].get('namespace'), obj['metadata']['name'])
                     for obj in self._select(res, namespace, params)]
            items = [self._delete((res, ns, name), propagation) for ns, name in names]
            return {'apiVersion': _api_version(res), 'kind': f'{info.kind}List',
                    'metadata': {'resourceVersion': str(self._rv)}, 'items': items}

    # ---- watch ----

    async def watch(self, res: Resource, namespace: str | None, name: str | None,
                    params: Mapping[str, str]) -> AsyncIterator[dict[str, Any]]:
        matches = _matcher(params, res)
        if name:
            matches_name = matches
            matches = lambda obj: obj['metadata'].get('name') == name and matches_name(obj)
        timeout = float(params['timeoutSeconds']) if params.get('timeoutSeconds') else None
        deadline = asyncio.get_running_loop().time() + timeout if timeout else None
        since = params.get('resourceVersion') or '0'
        with self._lock:
            self._info(res)
            if since == '0':  # "any version": the current state as synthetic ADDED events first
                backlog = [{'type': 'ADDED', 'object': fresh(obj)}
                           for obj in self._select(res, namespace, params) if matches(obj)]
                position, since_rv = len(self._log), self._rv
            else:
                backlog, since_rv = [], _parse_rv(since)
                position = next((i for i, (rv, _, _) in enumerate(self._log) if rv > since_rv), len(self._log))
        for event in backlog:
            yield event
        if params.get('sendInitialEvents') == 'true':  # a watch-list (kubectl 1.37): say where the state ends
            yield {'type': 'BOOKMARK', 'object': {'apiVersion': _api_version(res), 'kind': self._info(res).kind,
                   'metadata': {'resourceVersion': str(since_rv), 'annotations': {'k8s.io/initial-events-end': 'true'}}}}
        while not self._closed:
            changed = self._changed
            with self._lock:
                new_events, position = self._log[position:], len(self._log)
            for _, event_res, event in new_events:
                obj = event['object']
                if event_res == res and namespace in (None, obj['metadata'].get('namespace')) and matches(obj):
                    yield event
            remaining = None if deadline is None else deadline - asyncio.get_running_loop().time()
            if remaining is not None and remaining <= 0:
                return
            try:
                await asyncio.wait_for(changed.wait(), remaining)
            except asyncio.TimeoutError:
                return

    def close(self) -> None:
        self._closed = True
        self._wake()

    def _wake(self) -> None:
        # Tests may write through the store from their own thread; asyncio.Event is not
        # thread-safe, so hand the wake-up to the server's loop then.
        loop = self.loop
        if loop is not None and loop.is_running() and not _in_loop(loop):
            loop.call_soon_threadsafe(self._wake)
            return
        self._changed.set()
        self._changed = asyncio.Event()

    # ---- internals ----

    def _info(self, res: Resource | None) -> ResourceInfo:
        if res is None or res not in self.resources:
            raise ApiError(404, 'NotFound', 'the server could not find the requested resource')
        return self.resources[res]

    def _key(self, res: Resource, namespace: str | None, name: str) -> Key:
        return (res, namespace if self._info(res).namespaced else None, name)

    def _live(self, key: Key) -> dict[str, Any]:
        if key not in self.objects or self.objects[key].deleted:
            res, _, name = key
            raise ApiError(404, 'NotFound', f'{res.plural} "{name}" not found',
                           {'name': name, 'group': res.group, 'kind': res.plural})
        return self.objects[key].raw

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _record(self, res: Resource, kind: str, obj: dict[str, Any]) -> None:
        self._log.append((int(obj['metadata']['resourceVersion']), res, {'type': kind, 'object': fresh(obj)}))
        self._wake()

    @staticmethod
    def _check_resource_version(candidate: Mapping[str, Any], current: Mapping[str, Any]) -> None:
        wanted = (candidate.get('metadata') or {}).get('resourceVersion')
        if wanted and wanted != current['metadata']['resourceVersion']:
            name = current['metadata']['name']
            raise ApiError(409, 'Conflict', f'Operation cannot be fulfilled on "{name}": the object has been '
                           'modified; please apply your changes to the latest version and try again',
                           {'name': name})

    def _create(self, res: Resource, namespace: str | None, body: Any, dry_run: bool = False) -> dict[str, Any]:
        info = self._info(res)
        _require_object(body)
        _decodable(body)
        obj = fresh(body)
        meta = obj.setdefault('metadata', {})
        if info.namespaced:
            if namespace and meta.get('namespace') not in (None, namespace):
                raise ApiError(400, 'BadRequest', 'the namespace of the object does not match the URL')
            meta['namespace'] = namespace or meta.get('namespace') or 'default'
        else:
            meta.pop('namespace', None)
        if not meta.get('name') and meta.get('generateName'):
            meta['name'] = meta['generateName'] + secrets.token_hex(3)[:5]
        if not meta.get('name'):
            raise ApiError(422, 'Invalid', 'metadata.name: Required value: name or generateName is required')
        key = (res, meta.get('namespace'), meta['name'])
        if key in self.objects and not self.objects[key].deleted:
            raise ApiError(409, 'AlreadyExists', f'{res.plural} "{meta["name"]}" already exists',
                           {'name': meta['name'], 'group': res.group, 'kind': res.plural})
        if is_status_subresource(info) and res != CRDS:
            obj.pop('status', None)  # status is written through /status only
        obj.setdefault('apiVersion', _api_version(res))
        obj.setdefault('kind', info.kind)
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=_now(), generation=1)
        for field in ('deletionTimestamp', 'deletionGracePeriodSeconds', 'resourceVersion'):
            meta.pop(field, None)
        if dry_run:
            return obj
        if meta.get('namespace'):
            self._ensure_namespace(meta['namespace'])
        if res == CRDS:
            self._serve_crd(obj)
        meta['resourceVersion'] = self._next_rv()
        if key in self.objects:
            self.objects[key].create(obj)  # recreated: kmock keeps the old history before it
        else:
            self.objects[key] = obj
            self._keys.setdefault(res, {})[key] = None
        self._record(res, 'ADDED', obj)
        if garbage_collector.owners_absent(self, obj):  # the collector's notice of a new dependent
            self._delete(key, 'Background')
        return fresh(obj)

    def resource_of(self, api_version: str, kind: str) -> Resource | None:
        """The served resource of an apiVersion and kind (an owner reference's), or None."""
        known = self._by_kind.get((api_version, kind))
        if known is not None:
            return known
        group, _, version = api_version.rpartition('/')
        for res, info in self.resources.items():
            if info.kind == kind and res.version == version and (res.group or '') == group:
                self._by_kind[api_version, kind] = res
                return res
        return None

    def _ensure_namespace(self, namespace: str) -> None:
        if self.view(NAMESPACES, None, namespace) is None:
            self._create(NAMESPACES, None, {'metadata': {'name': namespace}, 'status': {'phase': 'Active'}})

    def _apply_write(self, res: Resource, current: dict[str, Any], candidate: dict[str, Any],
                     sub: str | None) -> dict[str, Any]:
        """The object after a write: status-only via /status, everything-but-status otherwise."""
        if sub == 'status':
            new = fresh(current)
            new['status'] = fresh(candidate.get('status'))
            if new['status'] is None:
                del new['status']
            return new
        if sub:
            raise ApiError(404, 'NotFound', f'subresource {sub} is not emulated')
        new = fresh(candidate)
        meta = new.setdefault('metadata', {})
        for field in SERVER_OWNED_META:
            meta.pop(field, None)
            if field in current['metadata']:
                meta[field] = current['metadata'][field]
        new['apiVersion'], new['kind'] = current['apiVersion'], current['kind']
        if is_status_subresource(self._info(res)):
            new.pop('status', None)
            if 'status' in current:
                new['status'] = fresh(current['status'])
        if _spec_part(new) != _spec_part(current):
            meta['generation'] = current['metadata'].get('generation', 1) + 1
        return new

    def _commit(self, key: Key, current: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        res = key[0]
        if new == current:  # a no-op write changes nothing and notifies nobody
            return fresh(current)
        meta = new['metadata']
        if meta.get('deletionTimestamp') and not meta.get('finalizers') and not meta.get('deletionGracePeriodSeconds'):
            return self._remove(key, new, propagation=None)  # the last finalizer is gone
        if res == CRDS:
            self._serve_crd(new)
        meta['resourceVersion'] = self._next_rv()
        self.objects[key].history.append(new)
        self._record(res, 'MODIFIED', new)
        return fresh(new)

    def _delete(self, key: Key, propagation: str | None, grace_period: int | None = None) -> dict[str, Any]:
        current = self._live(key)
        if key[0] == PODS:
            graceful = graceful_delete(current, grace_period)
            if graceful is not None:
                return current if graceful is current else self._commit(key, current, graceful)
        if current['metadata'].get('finalizers'):
            if current['metadata'].get('deletionTimestamp'):
                return fresh(current)  # already terminating
            new = fresh(current)
            new['metadata'].update(deletionTimestamp=_now(), deletionGracePeriodSeconds=0)
            return self._commit(key, current, new)
        return self._remove(key, current, propagation)

    def _remove(self, key: Key, obj: dict[str, Any], propagation: str | None) -> dict[str, Any]:
        res, namespace, name = key
        obj = fresh(obj)
        obj['metadata']['resourceVersion'] = self._next_rv()
        self.objects[key].delete()
        self._record(res, 'DELETED', obj)
        if res == CRDS:
            self._unserve_crd(obj)
        if res == NAMESPACES:
            for dep_key in [k for k, o in self.objects.items() if k[1] == name and not o.deleted]:
                self._delete(dep_key, propagation)
        garbage_collector.collect_dependents(self, obj, namespace, propagation)
        return obj

    def _serve_crd(self, crd: dict[str, Any]) -> None:
        """Make a CustomResourceDefinition's resources discoverable, and mark it Established."""
        self._by_kind.clear()
        spec, names = crd.get('spec') or {}, (crd.get('spec') or {}).get('names') or {}
        for version in spec.get('versions') or []:
            if not version.get('served', True):
                continue
            subresources = set((version.get('subresources') or spec.get('subresources') or {}).keys())
            self.resources[Resource(group=spec['group'], version=version['name'], plural=names['plural'])] = ResourceInfo(
                namespaced=spec.get('scope', 'Namespaced') == 'Namespaced', kind=names.get('kind'),
                singular=names.get('singular') or names.get('kind', '').lower(), verbs=ALL_VERBS,
                shortnames=names.get('shortNames') or (), categories=names.get('categories') or (),
                subresources=subresources)
        crd['status'] = {
            'acceptedNames': names,
            'storedVersions': [v['name'] for v in spec.get('versions') or [] if v.get('storage')],
            'conditions': [{'type': t, 'status': 'True', 'reason': r, 'lastTransitionTime': _now()}
                           for t, r in (('NamesAccepted', 'NoConflicts'), ('Established', 'InitialNamesAccepted'))],
        }

    def _unserve_crd(self, crd: dict[str, Any]) -> None:
        self._by_kind.clear()
        spec = crd.get('spec') or {}
        for version in spec.get('versions') or []:
            res = Resource(group=spec['group'], version=version['name'], plural=spec['names']['plural'])
            if res in self.resources:
                del self.resources[res]


def _in_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _require_object(body: Any) -> None:
    if not isinstance(body, dict):
        raise ApiError(400, 'BadRequest', 'the request body must be a JSON object')


def _parse_rv(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ApiError(400, 'BadRequest', f'invalid resourceVersion: {value!r}') from None


def _matcher(params: Mapping[str, str], res: Resource | None = None):
    try:
        labels_match = parse_label_selector(params.get('labelSelector'))
        fields_match = parse_field_selector(params.get('fieldSelector'), getattr(res, 'plural', None))
    except SelectorError as exc:
        raise ApiError(400, 'BadRequest', str(exc)) from None
    return lambda obj: labels_match(labels_of(obj)) and fields_match(obj)


def _apply_patch(current: dict[str, Any], content_type: str, body: Any) -> dict[str, Any]:
    if content_type == 'application/json-patch+json':
        try:
            return jsonpatch.apply_patch(current, body)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
            raise ApiError(422, 'Invalid', f'the json patch cannot be applied: {exc}') from None
    if content_type in ('application/merge-patch+json', 'application/strategic-merge-patch+json',
                        'application/json', ''):
        _require_object(body)
        return merge_patch(current, body)
    raise ApiError(415, 'UnsupportedMediaType', f'the patch type {content_type!r} is not supported')
