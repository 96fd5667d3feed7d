"""Server-side printing (`meta.k8s.io/v1` Table) of custom resources, for `kubectl get`.

kubectl asks with `Accept: application/json;as=Table;v=v1;g=meta.k8s.io, ...`; the API
server answers custom resources with the columns of the CRD version's
`additionalPrinterColumns`, as apiextensions-apiserver's table convertor does
(staging/src/k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor/
tableconvertor.go): a first `Name` column (format `name`), then each printer column
with its type, format, description and priority; each cell is the column's JSONPath
evaluated on the object (nil when absent), `date` columns shown as the age of the
timestamp (k8s.io/apimachinery/pkg/util/duration.HumanDuration). A CRD version without
printer columns gets `Name` and `Age` (metadata.creationTimestamp), the convertor's
default. Each row carries the object as `includeObject` asks: PartialObjectMetadata
(the default), the whole Object, or None. In a watch, only the first event's Table has
the column definitions (handlers/response.go sets NoHeaders after it).
Built-in kinds (pods, nodes, services, events, namespaces) get the API server's own
columns (builtin_tables.py): kubectl 1.37 prints no kind itself.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from typing import Any

from ddpjob.times import age, parse_time
from ddpjob_devcluster.apiserver import builtin_tables

TABLE_ACCEPT = re.compile(r"as=Table\s*;\s*v=v1\s*;\s*g=meta\.k8s\.io")
_STEP = re.compile(r"\.([A-Za-z0-9_-]+)|\[(\d+)\]")


def wants_table(headers: Mapping[str, str]) -> bool:
    accept = next((v for k, v in headers.items() if k.lower() == "accept"), "")
    return bool(TABLE_ACCEPT.search(accept))


def crd_version(store: Any, res: Any) -> dict[str, Any] | None:
    """The CRD version that serves `res`, or None for a built-in resource."""
    for crd in store.view_all(_crds(), None):
        spec = crd.get("spec") or {}
        if spec.get("group") == res.group and (spec.get("names") or {}).get("plural") == res.plural:
            for version in spec.get("versions") or []:
                if version.get("name") == res.version:
                    return version
    return None


def _crds() -> Any:
    from kmock._internal import references

    return references.resource(group="apiextensions.k8s.io", version="v1", plural="customresourcedefinitions")


def columns(version: Mapping[str, Any]) -> list[dict[str, Any]]:
    name = {
        "name": "Name",
        "type": "string",
        "format": "name",
        "priority": 0,
        "description": "Name must be unique within a namespace.",
    }
    printer = version.get("additionalPrinterColumns")
    if not printer:
        printer = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    return [name] + [
        {
            "name": c["name"],
            "type": c.get("type", "string"),
            "format": c.get("format", ""),
            "description": c.get("description", ""),
            "priority": int(c.get("priority", 0)),
            "jsonPath": c["jsonPath"],
        }
        for c in printer
    ]


def evaluate(obj: Any, path: str) -> Any:
    """A simple JSONPath (`.a.b`, `.a[0].b`), as printer columns use them; None when absent."""
    current = obj
    for key, index in _STEP.findall(path):
        if key:
            current = current.get(key) if isinstance(current, Mapping) else None
        else:
            current = current[int(index)] if isinstance(current, list) and int(index) < len(current) else None
        if current is None:
            return None
    return current


# apimachinery's duration.HumanDuration: one home, shared with `ddpjob describe`.
human_duration = age


def _cell(column: Mapping[str, Any], obj: Mapping[str, Any]) -> Any:
    value = evaluate(obj, column["jsonPath"])
    if value is None:
        return None
    if column["type"] == "date":
        try:
            then = parse_time(str(value))
        except ValueError:
            return str(value)
        if then is None:  # an empty time: what the API server says of a zero time
            return "<unknown>"
        return human_duration((datetime.datetime.now(datetime.UTC) - then).total_seconds())
    if isinstance(value, (dict, list)):
        import json

        return json.dumps(value, separators=(",", ":"))
    return value


def _row_object(obj: Mapping[str, Any], include: str) -> Any:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata") or {}}


def crd_printer(version: Mapping[str, Any]) -> tuple[list[dict[str, Any]], Any]:
    cols = columns(version)
    return cols, lambda obj, now: [(obj.get("metadata") or {}).get("name")] + [_cell(c, obj) for c in cols[1:]]


def printer(store: Any, res: Any) -> tuple[list[dict[str, Any]], Any] | None:
    """The columns and row function for `res`: its CRD version's printer columns, or the
    API server's printer of a built-in kind (builtin_tables.py); None: no Table."""
    if res is None:
        return None
    version = crd_version(store, res)
    return crd_printer(version) if version is not None else builtin_tables.printer(res)


def to_table(
    printer_: tuple[list[dict[str, Any]], Any],
    items: list[Mapping[str, Any]],
    params: Mapping[str, str],
    resource_version: str | None = None,
    headers: bool = True,
) -> dict[str, Any]:
    cols, row_of = printer_
    include = params.get("includeObject") or "Metadata"
    now = datetime.datetime.now(datetime.UTC)
    rows = []
    for obj in items:
        row: dict[str, Any] = {"cells": row_of(obj, now)}
        if include != "None":
            row["object"] = _row_object(obj, include)
        rows.append(row)
    table: dict[str, Any] = {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version or ""},
        "rows": rows,
        "columnDefinitions": [{k: v for k, v in c.items() if k != "jsonPath"} for c in cols] if headers else [],
    }
    return table


def maybe_table(store: Any, request: Any, result: Any) -> Any:
    """A list or object answer as a Table when the request asked for one."""
    if request.resource is None or not wants_table(request.headers):
        return result
    found = printer(store, request.resource)
    if found is None or not isinstance(result, Mapping):
        return result
    if "items" in result:
        return to_table(found, result["items"], request.params, (result.get("metadata") or {}).get("resourceVersion"))
    return to_table(found, [result], request.params, (result.get("metadata") or {}).get("resourceVersion"))


class WatchTables:
    """Turns each watch event's object into a one-row Table (headers on the first only)."""

    def __init__(self, store: Any, request: Any):
        self.printer = printer(store, request.resource) if wants_table(request.headers) else None
        self.params, self.first = request.params, True

    def __call__(self, event: Any) -> Any:
        if (
            self.printer is None
            or not isinstance(event, Mapping)
            or not isinstance(event.get("object"), Mapping)
            or event.get("type") in ("ERROR", "BOOKMARK")
        ):
            return event
        obj = event["object"]
        table = to_table(
            self.printer, [obj], self.params, (obj.get("metadata") or {}).get("resourceVersion"), headers=self.first
        )
        self.first = False
        return {**event, "object": table}
