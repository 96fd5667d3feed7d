"""The stored objects of the emulated API server and every read of them: `store.Store`'s
base, which adds the writes, the watches and the garbage collection.

Objects live in kmock's `ObjectsArray` (so `emulator.objects[...]` keeps every version for
assertions), with their keys indexed by resource; one re-entrant lock guards them, because
tests peek from their own thread. A read returns a copy (`get`, `list`, `peek`,
`peek_all`) or, for readers inside the dev cluster, the stored dict itself (`view`,
`view_all`): a write stores a new dict and never changes a stored one.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from kmock import ObjectsArray, ResourceInfo, ResourcesArray, resource as Resource

from ddpjob_devcluster.apiserver.errors import ApiError
from ddpjob_devcluster.apiserver.registry.plaindata import fresh
from ddpjob_devcluster.apiserver.registry.selectors import matcher
from ddpjob_devcluster.apiserver.registry.served_resources import Key, ServedResources, api_version

Objects = list[dict[str, Any]]  # named out here: inside the table, `list` is its method


class ObjectTable:
    def __init__(self, resources: ResourcesArray, objects: ObjectsArray | None = None):
        self.resources = resources
        self.objects = objects if objects is not None else ObjectsArray()
        # Keys by resource, in creation order: selecting one kind must not scan every
        # object of every kind (quota admission lists a namespace's quotas per Pod create).
        self._keys: dict[Resource, dict[Key, None]] = {}
        self.served = ServedResources(resources)
        self._rv = 0
        self._lock = threading.RLock()  # tests peek from their own thread

    def get(self, res: Resource, namespace: str | None, name: str) -> dict[str, Any]:
        with self._lock:
            self._info(res)
            return fresh(self._live(self._key(res, namespace, name)))

    def list(self, res: Resource, namespace: str | None, params: Mapping[str, str]) -> dict[str, Any]:
        with self._lock:
            info = self._info(res)
            items = self._select(res, namespace, params)
            return {
                "apiVersion": api_version(res),
                "kind": f"{info.kind}List",
                "metadata": {"resourceVersion": str(self._rv)},
                "items": fresh(items),
            }

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

    def peek_all(self, res: Resource, namespace: str | None) -> Objects:
        with self._lock:
            return fresh(self._select(res, namespace, {}))

    def view_all(self, res: Resource, namespace: str | None) -> Objects:
        """The stored objects themselves, for readers inside the dev cluster (admission,
        scheduler): no copy, because a write stores a new dict and never changes a stored
        one. Callers must not mutate them. Copying every Pod on every Pod create made
        admission O(Pods) deep copies per request."""
        with self._lock:
            return self._select(res, namespace, {})

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Hold every other writer off for a read-modify-write of several calls (server-side
        apply reads the object, merges, then writes it): nothing lands in between."""
        with self._lock:
            yield

    def _select(self, res: Resource, namespace: str | None, params: Mapping[str, str]) -> Objects:
        matches = matcher(params, res)
        objects = self.objects
        return [
            obj.raw
            for key in self._keys.get(res, ())
            if namespace in (None, key[1]) and not (obj := objects[key]).deleted and matches(obj.raw)
        ]

    def _info(self, res: Resource | None) -> ResourceInfo:
        return self.served.info(res)

    def _key(self, res: Resource, namespace: str | None, name: str) -> Key:
        return self.served.key(res, namespace, name)

    def _live(self, key: Key) -> dict[str, Any]:
        if key not in self.objects or self.objects[key].deleted:
            res, _, name = key
            raise ApiError(
                404,
                "NotFound",
                f'{res.plural} "{name}" not found',
                {"name": name, "group": res.group, "kind": res.plural},
            )
        return self.objects[key].raw

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)
