"""A CRD's structural schema, as the API server applies it (no CEL: crd_validator.py runs the rules).

Each step of crd_validator's order that the OpenAPI schema alone decides: the OpenAPI
type of a decoded JSON value, pruning of nulls, structural defaulting, unknown fields
(strict field validation), type/enum/bounds/pattern/required checks, and
x-kubernetes-list-type uniqueness and correlation of map-list items across an update.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import re2

MISSING = object()  # no value at this node (unlike None, which is JSON null)


class CRDError(NamedTuple):
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# OpenAPI's name for each Python type a YAML document yields; bool before int, since
# True is an int to Python and a boolean to the API server.
_OPENAPI_TYPES = (
    (type(None), "null"),
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
)


def type_name(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
        # The API server decodes an integer outside int64 as a float64 (apimachinery's
        # json.Unmarshal into unstructured): it is a "number", not an "integer".
        return "number"
    return next((name for kind, name in _OPENAPI_TYPES if isinstance(value, kind)), type(value).__name__)


def type_ok(schema: Mapping, value: Any) -> bool:
    if schema.get("x-kubernetes-int-or-string"):
        return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)
    kind = schema.get("type")
    if kind is None:  # only legal with x-kubernetes-preserve-unknown-fields
        return True
    got = type_name(value)
    return got == kind or (kind == "number" and got == "integer")


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class Run:
    """The errors of one validation, and whether any of them stops CEL from running."""

    def __init__(self) -> None:
        self.errors: list[CRDError] = []
        self.blocking = False

    def add(self, path: str, message: str, blocking: bool = False) -> None:
        self.errors.append(CRDError(path or "(root)", message))
        self.blocking = self.blocking or blocking


def check_schema(schema: Mapping, value: Any, path: str, run: Run) -> None:
    if not type_ok(schema, value):
        want = "integer or string" if schema.get("x-kubernetes-int-or-string") else schema.get("type")
        run.add(path, f"must be of type {want} (got {type_name(value)} {value!r})", blocking=True)
        return
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(f'"{v}"' for v in schema["enum"])
        run.add(path, f"Unsupported value: {value!r}: supported values: {supported}", blocking=True)
    if is_int(value) or isinstance(value, float):
        if "minimum" in schema and value < schema["minimum"]:
            run.add(path, f"should be greater than or equal to {schema['minimum']} (got {value})")
        if "maximum" in schema and value > schema["maximum"]:
            run.add(path, f"should be less than or equal to {schema['maximum']} (got {value})")
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            run.add(path, f"should be at least {schema['minLength']} chars long (got {value!r})")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            run.add(path, f"may not be longer than {schema['maxLength']} (got {len(value)})")
        if "pattern" in schema and not re2.search(schema["pattern"], value):
            run.add(path, f"should match '{schema['pattern']}' (got {value!r})")
    if isinstance(value, dict):
        for key in schema.get("required") or ():
            if key not in value:
                run.add(join(path, key), "Required value")
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, sub in value.items():
            if key in props:
                check_schema(props[key], sub, join(path, key), run)
            elif isinstance(extra, Mapping):
                check_schema(extra, sub, join(path, key), run)
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            run.add(path, f"should have at least {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            run.add(path, f"must have at most {schema['maxItems']} items")
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                check_schema(items, item, f"{path}[{i}]", run)
        check_list_type(schema, value, path, run)


def _preserves(schema: Mapping) -> bool:
    return bool(schema.get("x-kubernetes-preserve-unknown-fields"))


def prune_nulls(schema: Mapping, value: Any) -> Any:
    """Drop nulls of non-nullable object fields (the API server does it before defaulting)."""
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        out = {}
        for key, sub in value.items():
            sub_schema = props.get(key, extra if isinstance(extra, Mapping) else None)
            if (
                sub is None
                and (sub_schema is None or not sub_schema.get("nullable"))
                and (sub_schema is not None or not _preserves(schema))
            ):
                continue
            out[key] = prune_nulls(sub_schema, sub) if sub_schema is not None else sub
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [prune_nulls(schema["items"], item) for item in value]
    return value


def apply_defaults(schema: Mapping, value: Any) -> None:
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for key, sub in props.items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
        extra = schema.get("additionalProperties")
        for key, sub_value in value.items():
            sub_schema = props.get(key, extra if isinstance(extra, Mapping) else None)
            if sub_schema is not None:
                apply_defaults(sub_schema, sub_value)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for item in value:
            apply_defaults(schema["items"], item)


def unknown_fields(schema: Mapping, value: Any, path: str, root: bool = False) -> Iterator[str]:
    """Fields the schema does not know, as strict field validation reports them."""
    if isinstance(value, dict) and schema.get("type") == "object" and not _preserves(schema):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, sub in value.items():
            if root and key == "metadata":
                continue  # ObjectMeta is decoded (and checked) by the API machinery itself
            if key in props:
                yield from unknown_fields(props[key], sub, join(path, key))
            elif isinstance(extra, Mapping):
                yield from unknown_fields(extra, sub, join(path, key))
            elif extra is not True:
                yield join(path, key)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            yield from unknown_fields(schema["items"], item, f"{path}[{i}]")


def _map_key(schema: Mapping, item: Any) -> tuple | None:
    keys = schema.get("x-kubernetes-list-map-keys") or ()
    if not isinstance(item, dict):
        return None
    return tuple(repr(item.get(k)) for k in keys)


def check_list_type(schema: Mapping, value: list, path: str, run: Run) -> None:
    kind = schema.get("x-kubernetes-list-type")
    if kind not in ("map", "set"):
        return
    seen: set = set()
    for i, item in enumerate(value):
        key = _map_key(schema, item) if kind == "map" else repr(item)
        if key is None:
            continue
        if key in seen:
            shown = {k: item.get(k) for k in schema.get("x-kubernetes-list-map-keys") or ()} if kind == "map" else item
            run.add(f"{path}[{i}]", f"Duplicate value: {shown!r}")
        seen.add(key)


def correlate(schema: Mapping, value: list, old: Any) -> Iterator[tuple[Any, Any]]:
    """Pairs (item, old item); only map lists correlate items across an update."""
    by_key: dict = {}
    if schema.get("x-kubernetes-list-type") == "map" and isinstance(old, list):
        by_key = {_map_key(schema, o): o for o in old if _map_key(schema, o) is not None}
    for item in value:
        key = _map_key(schema, item) if by_key else None
        yield item, by_key.get(key, MISSING) if key is not None else MISSING
