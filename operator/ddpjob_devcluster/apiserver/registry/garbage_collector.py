"""Owner-reference garbage collection, as the API server's garbage collector does it
(pkg/controller/garbagecollector), run synchronously inside `store.Store`'s writes.

- An owner's deletion takes its dependents with it (Background/Foreground), or drops its
  reference from them (Orphan).
- A dependent is deleted once every owner is verified absent: gone, recreated with
  another uid, or (docs, "Owners and dependents") a namespaced owner in another namespace
  (garbagecollector.go attemptToDeleteItem, on the graph builder's notice of the new
  object). So a create that lost a race with its owner's deletion leaves nothing behind.
"""

from __future__ import annotations

from typing import Any, Protocol

from kmock import ObjectsArray, ResourcesArray, resource as Resource

from ddpjob_devcluster.apiserver.registry.plaindata import fresh
from ddpjob_devcluster.apiserver.registry.served_resources import Key, ServedResources


class Store(Protocol):
    """What the collector needs of the store (`store.Store` is one), named here so that the
    store imports the collector and the collector never imports the store back."""

    objects: ObjectsArray
    resources: ResourcesArray
    served: ServedResources

    def view(self, res: Resource, namespace: str | None, name: str) -> dict[str, Any] | None: ...

    def commit(self, key: Key, current: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]: ...

    def delete_key(self, key: Key, propagation: str | None, grace_period: int | None = None) -> dict[str, Any]: ...


def collect_dependents(store: Store, owner: dict[str, Any], namespace: str | None, propagation: str | None) -> None:
    """`owner` was removed: its dependents go (or are orphaned) at once."""
    uid = owner["metadata"]["uid"]
    for key, obj in list(store.objects.items()):
        if obj.deleted or (namespace is not None and key[1] != namespace):
            continue
        refs = obj.raw["metadata"].get("ownerReferences") or []
        if not any(ref.get("uid") == uid for ref in refs):
            continue
        if propagation == "Orphan":
            orphan = fresh(obj.raw)
            orphan["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") != uid] or None
            if orphan["metadata"]["ownerReferences"] is None:
                del orphan["metadata"]["ownerReferences"]
            store.commit(key, obj.raw, orphan)
        else:
            store.delete_key(key, propagation)


def owners_absent(store: Store, obj: dict[str, Any]) -> bool:
    """Whether `obj` has owner references and every one of them points at no live owner."""
    refs = obj["metadata"].get("ownerReferences") or []
    if not refs:
        return False
    for ref in refs:
        res = store.served.resource_of(ref.get("apiVersion", ""), ref.get("kind", ""))
        if res is None:
            return False  # an owner kind it cannot resolve: the collector leaves it (and retries)
        namespace = obj["metadata"].get("namespace") if store.resources[res].namespaced else None
        owner = store.view(res, namespace, ref.get("name", ""))
        if owner is not None and owner["metadata"].get("uid") == ref.get("uid"):
            return False
    return True
