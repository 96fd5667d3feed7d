"""The object semantics of the emulated API server: what a real kube-apiserver (with the
garbage collector) does to objects, kept only as deep as operators and their tests need.

Objects live in kmock's `ObjectsArray` (so `emulator.objects[...]` keeps every version for assertions);
this module adds uid/resourceVersion/generation, finalizers, and ownerReference garbage collection
(`garbage_collector.py`), with optimistic concurrency and the status subresource in `write_rules.py`, patches
in `patches.py`, CRD discovery in `served_resources.py` and the event log that watches replay in `event_log.py`.
"""
from __future__ import annotations

import asyncio
import secrets
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from kmock import ObjectsArray, ResourceInfo, ResourcesArray, resource as Resource

from ddpjob.times import now as _now
from ddpjob_devcluster.apiserver.registry import garbage_collector, write_rules
from ddpjob_devcluster.apiserver.errors import ApiError, decodable, parse_rv, require_object
from ddpjob_devcluster.apiserver.registry.event_log import EventLog, initial_events_end
from ddpjob_devcluster.apiserver.registry.graceful import PODS, graceful_delete
from ddpjob_devcluster.apiserver.registry.patches import apply_patch
from ddpjob_devcluster.apiserver.registry.plaindata import fresh
from ddpjob_devcluster.apiserver.registry.selectors import (SelectorError, labels_of, parse_field_selector,
                                                            parse_label_selector)
from ddpjob_devcluster.apiserver.registry.served_resources import (Key, ServedResources, api_version,
                                                                   is_status_subresource)

Admit = Callable[[Mapping[str, Any], dict[str, Any]], dict[str, Any]]
CRDS = Resource(group='apiextensions.k8s.io', version='v1', plural='customresourcedefinitions')
NAMESPACES = Resource(group='', version='v1', plural='namespaces')


class Store:
    def __init__(self, resources: ResourcesArray, objects: ObjectsArray | None = None):
        self.resources = resources
        self.objects = objects if objects is not None else ObjectsArray()
        # Keys by resource, in creation order: selecting one kind must not scan every
        # object of every kind (quota admission lists a namespace's quotas per Pod create).
        self._keys: dict[Resource, dict[Key, None]] = {}
        self.served = ServedResources(resources)
        self._rv = 0
        self._lock = threading.RLock()  # tests peek from their own thread
        self.events = EventLog(self._lock)
        self._log = self.events.entries  # (rv, resource, watch event), for tests and benchmarks
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
            return {'apiVersion': api_version(res), 'kind': f'{info.kind}List',
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
            require_object(body)
            decodable(body)
            if (body.get('metadata') or {}).get('name', name) != name:
                raise ApiError(400, 'BadRequest', 'the name of the object does not match the URL')
            write_rules.check_resource_version(body, current)
            new = self._apply_write(res, current, body, sub)
            return self._commit(key, current, admit(current, new) if admit else new)

    def patch(self, res: Resource, namespace: str | None, name: str, sub: str | None,
              content_type: str, body: Any, admit: Admit | None = None) -> dict[str, Any]:
        with self._lock:
            key = self._key(res, namespace, name)
            current = self._live(key)
            patched = apply_patch(current, content_type, body)
            # A patch that carries (or json-patches) a resourceVersion is a precondition.
            write_rules.check_resource_version(patched, current)
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
            return {'apiVersion': api_version(res), 'kind': f'{info.kind}List',
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
            kind = self._info(res).kind
            if since == '0':  # "any version": the current state as synthetic ADDED events first
                backlog = [{'type': 'ADDED', 'object': fresh(obj)}
                           for obj in self._select(res, namespace, params) if matches(obj)]
                position, end_rv = self.events.end(), self._rv
            else:
                backlog, position, end_rv = [], self.events.after(parse_rv(since)), parse_rv(since)
        if params.get('sendInitialEvents') == 'true':  # a watch-list (kubectl 1.37): say where the state ends
            backlog.append(initial_events_end(api_version(res), kind, end_rv))
        for event in backlog:
            yield event
        async for event in self.events.follow(position, res, namespace, matches, deadline):
            yield event

    def close(self) -> None:
        self.events.close()

    # ---- internals ----

    def _info(self, res: Resource | None) -> ResourceInfo:
        return self.served.info(res)

    def _key(self, res: Resource, namespace: str | None, name: str) -> Key:
        return self.served.key(res, namespace, name)

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
        self.events.append(res, kind, obj)

    def _create(self, res: Resource, namespace: str | None, body: Any, dry_run: bool = False) -> dict[str, Any]:
        info = self._info(res)
        require_object(body)
        decodable(body)
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
        obj.setdefault('apiVersion', api_version(res))
        obj.setdefault('kind', info.kind)
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=_now(), generation=1)
        for field in ('deletionTimestamp', 'deletionGracePeriodSeconds', 'resourceVersion'):
            meta.pop(field, None)
        if dry_run:
            return obj
        if meta.get('namespace'):
            self._ensure_namespace(meta['namespace'])
        if res == CRDS:
            self.served.serve_crd(obj)
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

    def _ensure_namespace(self, namespace: str) -> None:
        if self.view(NAMESPACES, None, namespace) is None:
            self._create(NAMESPACES, None, {'metadata': {'name': namespace}, 'status': {'phase': 'Active'}})

    def _apply_write(self, res: Resource, current: dict[str, Any], candidate: dict[str, Any],
                     sub: str | None) -> dict[str, Any]:
        return write_rules.apply_write(current, candidate, sub, is_status_subresource(self._info(res)))

    def _commit(self, key: Key, current: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        res = key[0]
        if new == current:  # a no-op write changes nothing and notifies nobody
            return fresh(current)
        meta = new['metadata']
        if meta.get('deletionTimestamp') and not meta.get('finalizers') and not meta.get('deletionGracePeriodSeconds'):
            return self._remove(key, new, propagation=None)  # the last finalizer is gone
        if res == CRDS:
            self.served.serve_crd(new)
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
            self.served.unserve_crd(obj)
        if res == NAMESPACES:
            for dep_key in [k for k, o in self.objects.items() if k[1] == name and not o.deleted]:
                self._delete(dep_key, propagation)
        garbage_collector.collect_dependents(self, obj, namespace, propagation)
        return obj

def _matcher(params: Mapping[str, str], res: Resource | None = None):
    try:
        labels_match = parse_label_selector(params.get('labelSelector'))
        fields_match = parse_field_selector(params.get('fieldSelector'), getattr(res, 'plural', None))
    except SelectorError as exc:
        raise ApiError(400, 'BadRequest', str(exc)) from None
    return lambda obj: labels_match(labels_of(obj)) and fields_match(obj)
