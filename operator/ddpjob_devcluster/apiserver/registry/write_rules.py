"""What a client's write may change of a stored object, as the API server decides it.

Server-owned metadata (uid, resourceVersion, generation, ...) is kept; a write through
`/status` changes only the status and any other write everything but it (for resources
with a status subresource); generation counts changes of the desired state; a write that
names a resourceVersion is a precondition (409 Conflict when it is stale).
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Mapping
from typing import Any

from kmock import ResourceInfo

from ddpjob.times import now as _now
from ddpjob_devcluster.apiserver.errors import ApiError, decodable, require_object
from ddpjob_devcluster.apiserver.registry.plaindata import fresh

# Fields the server owns: a client's PUT/PATCH cannot change them.
SERVER_OWNED_META = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "namespace",
    "name",
    "resourceVersion",
)


def new_object(
    body: Any, namespace: str | None, info: ResourceInfo, api_version: str, *, keep_status: bool
) -> dict[str, Any]:
    """What a create stores of `body` (before its resourceVersion): its namespace from the URL
    (none for a cluster-scoped kind), a name made from generateName, and the server's
    metadata; the status dropped where it is written through /status only."""
    require_object(body)
    decodable(body)
    obj = fresh(body)
    meta = obj.setdefault("metadata", {})
    if info.namespaced:
        if namespace and meta.get("namespace") not in (None, namespace):
            raise ApiError(400, "BadRequest", "the namespace of the object does not match the URL")
        meta["namespace"] = namespace or meta.get("namespace") or "default"
    else:
        meta.pop("namespace", None)
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
    if not meta.get("name"):
        raise ApiError(422, "Invalid", "metadata.name: Required value: name or generateName is required")
    if not keep_status:
        obj.pop("status", None)
    obj.setdefault("apiVersion", api_version)
    obj.setdefault("kind", info.kind)
    meta.update(uid=str(uuid.uuid4()), creationTimestamp=_now(), generation=1)
    for field in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion"):
        meta.pop(field, None)
    return obj


def spec_part(obj: Mapping[str, Any]) -> dict[str, Any]:
    # Generation tracks the desired state: everything but metadata and status.
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def check_resource_version(candidate: Mapping[str, Any], current: Mapping[str, Any]) -> None:
    wanted = (candidate.get("metadata") or {}).get("resourceVersion")
    if wanted and wanted != current["metadata"]["resourceVersion"]:
        name = current["metadata"]["name"]
        raise ApiError(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on "{name}": the object has been '
            "modified; please apply your changes to the latest version and try again",
            {"name": name},
        )


def apply_write(
    current: dict[str, Any], candidate: dict[str, Any], sub: str | None, status_subresource: bool
) -> dict[str, Any]:
    """The object after a write: status-only via /status, everything-but-status otherwise."""
    if sub == "status":
        new = fresh(current)
        new["status"] = fresh(candidate.get("status"))
        if new["status"] is None:
            del new["status"]
        return new
    if sub:
        raise ApiError(404, "NotFound", f"subresource {sub} is not emulated")
    new = fresh(candidate)
    meta = new.setdefault("metadata", {})
    for field in SERVER_OWNED_META:
        meta.pop(field, None)
        if field in current["metadata"]:
            meta[field] = current["metadata"][field]
    new["apiVersion"], new["kind"] = current["apiVersion"], current["kind"]
    if status_subresource:
        new.pop("status", None)
        if "status" in current:
            new["status"] = fresh(current["status"])
    if spec_part(new) != spec_part(current):
        meta["generation"] = current["metadata"].get("generation", 1) + 1
    return new
