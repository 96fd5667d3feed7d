"""Server-side apply (`PATCH` with `application/apply-patch+yaml`) for the emulator.

Modelled on the API server's apply (k8s.io/apiserver/pkg/endpoints/handlers/patch.go,
applyPatcher, and sigs.k8s.io/structured-merge-diff):
- `fieldManager` is required (400 otherwise); an absent object is created by the apply;
- each manager owns the fields it applied, recorded in `metadata.managedFields` as
  FieldsV1 (`{"f:spec": {"f:nodes": {}}}`) with operation `Apply`;
- a field set by this apply to a value different from what another Apply manager owns is
  a 409 Conflict naming the field and its manager, unless `force=true`, which takes it over;
- a field this manager applied before and leaves out now is removed (when no other
  manager owns it).
Simplifications, stated: lists are atomic (what the CRD's lists are without
x-kubernetes-list-type=map), and ownership is recorded for Apply only, not for plain
create/update/patch requests, so those writers never cause an apply conflict here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ddpjob import times
from ddpjob_devcluster.apiserver.errors import ApiError
from ddpjob_devcluster.apiserver.registry.plaindata import fresh

if TYPE_CHECKING:
    from ddpjob_devcluster.apiserver.registry.store import Store

APPLY_TYPES = ("application/apply-patch+yaml", "application/apply-patch+json")
Path = tuple[str, ...]
_IGNORED_META = {"resourceVersion", "managedFields", "uid", "creationTimestamp", "generation"}


def _leaves(obj: Any, prefix: Path = ()) -> dict[Path, Any]:
    """Every leaf (a scalar or an atomic list) of an applied config, by path."""
    if isinstance(obj, dict) and obj:
        out: dict[Path, Any] = {}
        for key, value in obj.items():
            if prefix == ("metadata",) and key in _IGNORED_META:
                continue
            if prefix == () and key in ("apiVersion", "kind"):
                continue
            out.update(_leaves(value, (*prefix, key)))
        return out
    return {prefix: obj}


def _fields_v1(paths: list[Path]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path in paths:
        node = tree
        for part in path:
            node = node.setdefault(f"f:{part}", {})
    return tree


def _paths(tree: Mapping[str, Any], prefix: Path = ()) -> list[Path]:
    out: list[Path] = []
    for key, sub in tree.items():
        path = (*prefix, key[2:])
        out.extend(_paths(sub, path) if sub else [path])
    return out


def _get(obj: Any, path: Path) -> Any:
    for part in path:
        if not isinstance(obj, dict) or part not in obj:
            return _MISSING
        obj = obj[part]
    return obj


def _set(obj: dict[str, Any], path: Path, value: Any) -> None:
    for part in path[:-1]:
        obj = obj.setdefault(part, {})
    obj[path[-1]] = fresh(value)


def _remove(obj: dict[str, Any], path: Path) -> None:
    parents = []
    for part in path[:-1]:
        if not isinstance(obj.get(part), dict):
            return
        parents.append((obj, part))
        obj = obj[part]
    obj.pop(path[-1], None)
    for parent, part in reversed(parents):  # drop maps the removal left empty
        if parent[part] == {}:
            del parent[part]


_MISSING = object()


def _entry(manager: str, paths: list[Path], api_version: str) -> dict[str, Any]:
    now = times.now()
    return {
        "manager": manager,
        "operation": "Apply",
        "apiVersion": api_version,
        "time": now,
        "fieldsType": "FieldsV1",
        "fieldsV1": _fields_v1(paths),
    }


def apply(
    store: Store,
    res: Any,
    namespace: str | None,
    name: str,
    sub: str | None,
    body: Any,
    params: Mapping[str, str],
    admit: Any = None,
    admit_create: Any = None,
) -> dict[str, Any]:
    """`admit(current, new)` / `admit_create(body)`: the emulator's admission for the update
    or the create an apply turns into (returns what to store, or raises the refusal)."""
    manager = params.get("fieldManager")
    if not manager:
        raise ApiError(400, "BadRequest", "PATCH, application/apply-patch+yaml requires fieldManager to be set")
    if not isinstance(body, dict) or not body.get("apiVersion") or not body.get("kind"):
        raise ApiError(400, "BadRequest", "the applied configuration needs apiVersion and kind")
    if (body.get("metadata") or {}).get("name", name) != name:
        raise ApiError(400, "BadRequest", "the name of the object does not match the URL")
    force = params.get("force") in ("true", "1")
    applied = _leaves(body)
    with store.transaction():  # the merge below is of the version it writes over
        store.served.info(res)  # a kind not served is a 404 before admission sees the body
        current = store.view(res, namespace, name)
        if current is None:
            new = fresh(body)
            new.setdefault("metadata", {})["name"] = name
            new["metadata"]["managedFields"] = [_entry(manager, list(applied), body["apiVersion"])]
            if admit_create is not None:
                new = admit_create(new)
            return store.create(res, namespace, new)
        entries = [e for e in current["metadata"].get("managedFields") or [] if e.get("operation") == "Apply"]
        owned = {e["manager"]: set(_paths(e.get("fieldsV1") or {})) for e in entries}
        conflicts = [
            (path, other)
            for other, paths in owned.items()
            if other != manager
            for path in applied
            if path in paths and _get(current, path) != applied[path]
        ]
        if conflicts and not force:
            detail = "; ".join(f'conflict with "{m}": .{".".join(p)}' for p, m in conflicts)
            raise ApiError(409, "Conflict", f"Apply failed with {len(conflicts)} conflict(s): {detail}")
        new = fresh(current)
        for path, value in applied.items():
            _set(new, path, value)
        others = set().union(*(paths for m, paths in owned.items() if m != manager)) if owned else set()
        for path in owned.get(manager, set()) - set(applied) - others:
            _remove(new, path)
        kept = []
        for entry in entries:
            if entry["manager"] == manager:
                continue
            left = [p for p in _paths(entry.get("fieldsV1") or {}) if not (force and p in applied)]
            if left:
                kept.append({**entry, "fieldsV1": _fields_v1(left)})
        new["metadata"]["managedFields"] = [*kept, _entry(manager, list(applied), body["apiVersion"])]
        return store.update(res, namespace, name, sub, new, admit)
