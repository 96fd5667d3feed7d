"""The object semantics of the emulated API server: what a real kube-apiserver (with the
garbage collector) does to objects, kept only as deep as operators and their tests need.

The objects and their reads live in `object_table.py` (kmock's `ObjectsArray`, so
`emulator.objects[...]` keeps every version for assertions); this module adds the writes:
uid/resourceVersion/generation, finalizers, and ownerReference garbage collection
(`garbage_collector.py`), with optimistic concurrency and the status subresource in `write_rules.py`, patches
in `patches.py`, CRD discovery in `served_resources.py` and the event log that watches replay in `event_log.py`.
Server-side apply (`apply.py`) and the collector use the store through its public methods only
(`transaction`, `update`, `commit`, `delete_key`), as every other module does.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from kmock import ObjectsArray, ResourcesArray, resource as Resource

from ddpjob.times import now as _now
from ddpjob_devcluster.apiserver.errors import ApiError, decodable, parse_rv, require_object
from ddpjob_devcluster.apiserver.registry import garbage_collector, served_resources, write_rules
from ddpjob_devcluster.apiserver.registry.event_log import EventLog, initial_events_end
from ddpjob_devcluster.apiserver.registry.graceful import PODS, graceful_delete
from ddpjob_devcluster.apiserver.registry.object_table import ObjectTable
from ddpjob_devcluster.apiserver.registry.patches import apply_patch
from ddpjob_devcluster.apiserver.registry.plaindata import fresh
from ddpjob_devcluster.apiserver.registry.selectors import matcher
from ddpjob_devcluster.apiserver.registry.served_resources import Key, api_version

Admit = Callable[[Mapping[str, Any], dict[str, Any]], dict[str, Any]]
CRDS = Resource(group="apiextensions.k8s.io", version="v1", plural="customresourcedefinitions")
NAMESPACES = Resource(group="", version="v1", plural="namespaces")


class Store(ObjectTable):
    def __init__(self, resources: ResourcesArray, objects: ObjectsArray | None = None):
        super().__init__(resources, objects)
        self.events = EventLog(self._lock)
        self._create(NAMESPACES, None, {"metadata": {"name": "default"}})

    # ---- writes ----

    def create(self, res: Resource, namespace: str | None, body: Any, dry_run: bool = False) -> dict[str, Any]:
        with self._lock:
            return self._create(res, namespace, body, dry_run)

    def replace(
        self, res: Resource, namespace: str | None, name: str, sub: str | None, body: Any, admit: Admit | None = None
    ) -> dict[str, Any]:
        """`admit(current, new)` returns what to store or raises the refusal (admission)."""
        with self._lock:
            key = self._key(res, namespace, name)
            current = self._live(key)
            require_object(body)
            decodable(body)
            if (body.get("metadata") or {}).get("name", name) != name:
                raise ApiError(400, "BadRequest", "the name of the object does not match the URL")
            write_rules.check_resource_version(body, current)
            return self._update(key, current, body, sub, admit)

    def patch(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        sub: str | None,
        content_type: str,
        body: Any,
        admit: Admit | None = None,
    ) -> dict[str, Any]:
        with self._lock:
            key = self._key(res, namespace, name)
            current = self._live(key)
            patched = apply_patch(current, content_type, body)
            # A patch that carries (or json-patches) a resourceVersion is a precondition.
            write_rules.check_resource_version(patched, current)
            return self._update(key, current, patched, sub, admit)

    def update(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        sub: str | None,
        candidate: dict[str, Any],
        admit: Admit | None = None,
    ) -> dict[str, Any]:
        """Store `candidate` as the object's next version, through the write rules of `sub`
        (the status subresource or the main resource) and `admit`, as `replace` does but
        with no resourceVersion precondition: for a read-modify-write inside `transaction()`."""
        with self._lock:
            key = self._key(res, namespace, name)
            return self._update(key, self._live(key), candidate, sub, admit)

    def delete(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        propagation: str | None,
        grace_period: int | None = None,
        uid: str | None = None,
    ) -> dict[str, Any]:
        with self._lock:
            key = self._key(res, namespace, name)
            if uid is not None and self._live(key)["metadata"]["uid"] != uid:
                # rest.BeforeDelete (apiserver/pkg/registry/rest/delete.go): the Kind, not the resource.
                kind = self._info(res).kind
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {kind} "{name}": the UID in the '
                    f"precondition ({uid}) does not match the UID in record "
                    f"({self._live(key)['metadata']['uid']}). The object might have been deleted and "
                    "then recreated",
                    {"name": name, "kind": kind},
                )
            return self.delete_key(key, propagation, grace_period)

    def delete_collection(
        self, res: Resource, namespace: str | None, params: Mapping[str, str], propagation: str | None
    ) -> dict[str, Any]:
        with self._lock:
            info = self._info(res)
            names = [
                (obj["metadata"].get("namespace"), obj["metadata"]["name"])
                for obj in self._select(res, namespace, params)
            ]
            items = [self.delete_key((res, ns, name), propagation) for ns, name in names]
            return {
                "apiVersion": api_version(res),
                "kind": f"{info.kind}List",
                "metadata": {"resourceVersion": str(self._rv)},
                "items": items,
            }

    # ---- watch ----

    async def watch(
        self, res: Resource, namespace: str | None, name: str | None, params: Mapping[str, str]
    ) -> AsyncIterator[dict[str, Any]]:
        selected = matcher(params, res)

        def matches(obj: Mapping[str, Any]) -> bool:
            return (not name or obj["metadata"].get("name") == name) and selected(obj)

        timeout = float(params["timeoutSeconds"]) if params.get("timeoutSeconds") else None
        deadline = asyncio.get_running_loop().time() + timeout if timeout else None
        since = params.get("resourceVersion") or "0"
        with self._lock:
            kind = self._info(res).kind or ""  # served resources have one; kmock's type allows None
            if since == "0":  # "any version": the current state as synthetic ADDED events first
                backlog = [
                    {"type": "ADDED", "object": fresh(obj)}
                    for obj in self._select(res, namespace, params)
                    if matches(obj)
                ]
                position, end_rv = self.events.end(), self._rv
            else:
                backlog, position, end_rv = [], self.events.after(parse_rv(since)), parse_rv(since)
        if params.get("sendInitialEvents") == "true":  # a watch-list (kubectl 1.37): say where the state ends
            backlog.append(initial_events_end(api_version(res), kind, end_rv))
        for event in backlog:
            yield event
        async for event in self.events.follow(position, res, namespace, matches, deadline):
            yield event

    def close(self) -> None:
        self.events.close()

    # ---- for the rest of the registry (server-side apply, the garbage collector) ----
    # (and `transaction`, on the table)

    def commit(self, key: Key, current: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        """Store `new` as the next version of the object at `key`, whose stored version is
        `current`, with no write rules and no admission: the store's own writes and the
        garbage collector's (an orphaned dependent). The last finalizer gone from a deleted
        object removes it; a no-op write changes nothing and notifies nobody."""
        with self._lock:
            res = key[0]
            if new == current:
                return fresh(current)
            meta = new["metadata"]
            gone = not meta.get("finalizers") and not meta.get("deletionGracePeriodSeconds")
            if meta.get("deletionTimestamp") and gone:
                return self._remove(key, new, propagation=None)
            if res == CRDS:
                self.served.serve_crd(new)
            meta["resourceVersion"] = self._next_rv()
            self.objects[key].history.append(new)
            self.events.append(res, "MODIFIED", new)
            return fresh(new)

    def delete_key(self, key: Key, propagation: str | None, grace_period: int | None = None) -> dict[str, Any]:
        """Delete the object at `key` (a stored key, already resolved): graceful for Pods,
        marked while finalizers remain, else removed with its dependents per `propagation`."""
        with self._lock:
            current = self._live(key)
            if key[0] == PODS:
                graceful = graceful_delete(current, grace_period)
                if graceful is not None:
                    return current if graceful is current else self.commit(key, current, graceful)
            if current["metadata"].get("finalizers"):
                if current["metadata"].get("deletionTimestamp"):
                    return fresh(current)  # already terminating
                new = fresh(current)
                new["metadata"].update(deletionTimestamp=_now(), deletionGracePeriodSeconds=0)
                return self.commit(key, current, new)
            return self._remove(key, current, propagation)

    # ---- internals ----

    def _create(self, res: Resource, namespace: str | None, body: Any, dry_run: bool = False) -> dict[str, Any]:
        info = self._info(res)
        obj = write_rules.new_object(
            body,
            namespace,
            info,
            api_version(res),
            keep_status=res == CRDS or not served_resources.is_status_subresource(info),
        )
        meta = obj["metadata"]
        key = (res, meta.get("namespace"), meta["name"])
        if key in self.objects and not self.objects[key].deleted:
            raise ApiError(
                409,
                "AlreadyExists",
                f'{res.plural} "{meta["name"]}" already exists',
                {"name": meta["name"], "group": res.group, "kind": res.plural},
            )
        if dry_run:
            return obj
        if meta.get("namespace"):
            self._ensure_namespace(meta["namespace"])
        if res == CRDS:
            self.served.serve_crd(obj)
        meta["resourceVersion"] = self._next_rv()
        if key in self.objects:
            self.objects[key].create(obj)  # recreated: kmock keeps the old history before it
        else:
            self.objects[key] = obj
            self._keys.setdefault(res, {})[key] = None
        self.events.append(res, "ADDED", obj)
        if garbage_collector.owners_absent(self, obj):  # the collector's notice of a new dependent
            self.delete_key(key, "Background")
        return fresh(obj)

    def _ensure_namespace(self, namespace: str) -> None:
        if self.view(NAMESPACES, None, namespace) is None:
            self._create(NAMESPACES, None, {"metadata": {"name": namespace}, "status": {"phase": "Active"}})

    def _update(
        self, key: Key, current: dict[str, Any], candidate: dict[str, Any], sub: str | None, admit: Admit | None
    ) -> dict[str, Any]:
        status_apart = served_resources.is_status_subresource(self._info(key[0]))
        new = write_rules.apply_write(current, candidate, sub, status_apart)
        return self.commit(key, current, admit(current, new) if admit else new)

    def _remove(self, key: Key, obj: dict[str, Any], propagation: str | None) -> dict[str, Any]:
        res, namespace, name = key
        obj = fresh(obj)
        obj["metadata"]["resourceVersion"] = self._next_rv()
        self.objects[key].delete()
        self.events.append(res, "DELETED", obj)
        if res == CRDS:
            self.served.unserve_crd(obj)
        if res == NAMESPACES:
            for dep_key in [k for k, o in self.objects.items() if k[1] == name and not o.deleted]:
                self.delete_key(dep_key, propagation)
        garbage_collector.collect_dependents(self, obj, namespace, propagation)
        return obj
