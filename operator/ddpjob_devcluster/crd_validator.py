"""Check an object against a CRD the way the API server does, without an API server.

Test support for tests/api/test_crd_parity.py: it proves that what `kubectl apply`
rejects (the CRD's structural schema plus its CEL `x-kubernetes-validations`) and what
`ddpjob.api.spec` rejects are the same objects, for the same fields.

What it models, in the API server's order (apiextensions-apiserver, customresource
strategy and validation):

1. routing: `apiVersion` must be a served version of the CRD's group, `kind` its kind
   (a wrong one never reaches this CRD: "no matches for kind");
2. the status subresource: `status` sent to the main resource is dropped;
3. pruning of nulls: a `null` in a non-nullable field is removed before defaulting;
4. strict field validation (`kubectl apply --validate=strict`, the default): an unknown
   field fails the request with only those errors;
5. structural defaulting, recursively, through properties, additionalProperties and items;
6. OpenAPI validation: type (with x-kubernetes-int-or-string), enum, required, minimum,
   maximum, minLength, maxLength, pattern (RE2, unanchored, like Go), minItems, maxItems;
   ObjectMeta's own name/namespace checks; x-kubernetes-list-type map/set uniqueness;
7. CEL rules with celpy, `self` bound to the defaulted value at the rule's node, root rules
   seeing only metadata.name/generateName; rules naming `oldSelf` (transition rules) run
   only on update and only where the old object has a value at the same node (object
   properties and map-list items by key correlate; atomic list items do not). As in the
   API server, no rule runs when a type or enum error was found ("some validation rules
   were not checked because the object was invalid").

Not modelled: validation ratcheting, CEL cost limits, `format`, the Kubernetes-only CEL
libraries (quantity, url, ...), `optionalOldSelf`.

Errors are `CRDError(path, message)` tuples; paths look like Python's FieldError paths:
`spec.env[1].name`, `metadata.name`, `spec`.
"""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path
from typing import Any, Iterator, Mapping, NamedTuple

import celpy
import re2
import yaml

ROOT = Path(__file__).resolve().parents[2]
CRD_PATH = ROOT / "manifests" / "crd" / "ddpjobs.ddpjob.io.yaml"

_MISSING = object()
_DNS1123_LABEL = re2.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re2.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_OLD_SELF = re.compile(r"\boldSelf\b")


class CRDError(NamedTuple):
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class Rule(NamedTuple):
    path: str  # the schema node the rule sits on, e.g. "spec.nodes" or "" for the root
    rule: str
    message: str | None
    field_path: str | None


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# OpenAPI's name for each Python type a YAML document yields; bool before int, since
# True is an int to Python and a boolean to the API server.
_OPENAPI_TYPES = ((type(None), "null"), (bool, "boolean"), (int, "integer"), (float, "number"),
                  (str, "string"), (list, "array"), (dict, "object"))


def _type_name(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and not -2 ** 63 <= value < 2 ** 63:
        # The API server decodes an integer outside int64 as a float64 (apimachinery's
        # json.Unmarshal into unstructured): it is a "number", not an "integer".
        return "number"
    return next((name for kind, name in _OPENAPI_TYPES if isinstance(value, kind)), type(value).__name__)


def _type_ok(schema: Mapping, value: Any) -> bool:
    if schema.get("x-kubernetes-int-or-string"):
        return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)
    kind = schema.get("type")
    if kind is None:  # only legal with x-kubernetes-preserve-unknown-fields
        return True
    got = _type_name(value)
    return got == kind or (kind == "number" and got == "integer")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Run:
    """The errors of one validation, and whether any of them stops CEL from running."""

    def __init__(self) -> None:
        self.errors: list[CRDError] = []
        self.blocking = False

    def add(self, path: str, message: str, blocking: bool = False) -> None:
        self.errors.append(CRDError(path or "(root)", message))
        self.blocking = self.blocking or blocking


class CRDValidator:
    def __init__(self, crd: Mapping[str, Any], version: str | None = None):
        spec = crd["spec"]
        self.group: str = spec["group"]
        self.kind: str = spec["names"]["kind"]
        served = [v for v in spec["versions"] if v.get("served")]
        chosen = next((v for v in served if v["name"] == version), None) if version else served[0]
        if chosen is None:
            raise ValueError(f"version {version!r} is not served by {crd['metadata']['name']}")
        self.version: str = chosen["name"]
        self.api_versions = {f"{self.group}/{v['name']}" for v in served}
        self.has_status_subresource = "status" in (chosen.get("subresources") or {})
        self.schema: Mapping[str, Any] = chosen["schema"]["openAPIV3Schema"]
        self._env = celpy.Environment()  # celpy's `matches` is RE2 already, as in Kubernetes

    @classmethod
    def from_file(cls, path: Path | str = CRD_PATH, version: str | None = None) -> "CRDValidator":
        return cls(yaml.safe_load(Path(path).read_text()), version)

    # --- the schema's rules ------------------------------------------------------------

    def rules(self) -> list[Rule]:
        """Every x-kubernetes-validations rule with the schema path it sits on."""
        found: list[Rule] = []

        def walk(schema: Mapping, path: str) -> None:
            for r in schema.get("x-kubernetes-validations") or ():
                found.append(Rule(path, r["rule"], r.get("message"), r.get("fieldPath")))
            for key, sub in (schema.get("properties") or {}).items():
                walk(sub, _join(path, key))
            if isinstance(schema.get("additionalProperties"), Mapping):
                walk(schema["additionalProperties"], _join(path, "*"))
            if isinstance(schema.get("items"), Mapping):
                walk(schema["items"], f"{path}[*]")

        walk(self.schema, "")
        return found

    def compile_errors(self) -> list[CRDError]:
        """Rules that do not compile (the API server refuses such a CRD)."""
        errors = []
        for r in self.rules():
            try:
                self._program(r.rule)
            except Exception as exc:  # noqa: BLE001 - celpy raises several parser types
                errors.append(CRDError(r.path or "(root)", f"rule {r.rule!r} does not compile: {_one_line(exc)}"))
        return errors

    @functools.lru_cache(maxsize=None)
    def _program(self, rule: str) -> celpy.Runner:
        return self._env.program(self._env.compile(rule))

    # --- what the API server does to an incoming object --------------------------------

    def defaulted(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """The object with nulls pruned and the schema's defaults applied, as stored."""
        out = copy.deepcopy(dict(obj))
        if self.has_status_subresource:
            out.pop("status", None)
        out = _prune_nulls(self.schema, out)
        _apply_defaults(self.schema, out)
        return out

    def validate(self, obj: Any, old: Mapping[str, Any] | None = None) -> list[CRDError]:
        """Errors for creating `obj`, or for updating `old` to `obj` when old is given."""
        run = _Run()
        if not isinstance(obj, Mapping):
            run.add("", f"must be of type object (got {_type_name(obj)})", blocking=True)
            return run.errors
        self._check_routing(obj, run)
        if run.errors:
            return run.errors
        new = self.defaulted(obj)
        for path in _unknown_fields(self.schema, new, "", root=True):
            run.add(path, f'unknown field "{path}"')
        if run.errors:
            return run.errors  # strict field validation fails the request on these alone
        old_value = self.defaulted(old) if old is not None else _MISSING
        self._check_schema(self.schema, new, "", run)
        self._check_object_meta(new, run)
        if not run.blocking:
            self._check_rules(self.schema, new, old_value, "", run, root=True)
        return run.errors

    def validate_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[CRDError]:
        return self.validate(new, old)

    def _check_routing(self, obj: Mapping, run: _Run) -> None:
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if api_version is None:
            run.add("apiVersion", "Required value: apiVersion not set")
        elif api_version not in self.api_versions:
            run.add("apiVersion", f"no matches for apiVersion {api_version!r}: "
                                  f"must be one of {', '.join(sorted(self.api_versions))}")
        if kind is None:
            run.add("kind", "Required value: kind not set")
        elif kind != self.kind:
            run.add("kind", f"no matches for kind {kind!r} in group {self.group}: must be {self.kind}")

    def _check_object_meta(self, obj: Mapping, run: _Run) -> None:
        """ObjectMeta validation the API server applies to every custom resource."""
        meta = obj.get("metadata")
        if not isinstance(meta, Mapping):
            return  # a type error was already reported, or the field is required elsewhere
        name, generate = meta.get("name"), meta.get("generateName")
        if name is None and generate is None:
            run.add("metadata.name", "Required value: name or generateName is required")
        for key in ("name", "generateName", "namespace"):
            value = meta.get(key)
            if value is not None and not isinstance(value, str):
                run.add(f"metadata.{key}", f"must be of type string (got {_type_name(value)})", blocking=True)
        if isinstance(name, str) and not (len(name) <= 253 and _DNS1123_SUBDOMAIN.search(name)):
            run.add("metadata.name", f"Invalid value: {name!r}: a lowercase RFC 1123 subdomain must consist of "
                                     "lower case alphanumeric characters, '-' or '.'")
        ns = meta.get("namespace")
        if isinstance(ns, str) and not (len(ns) <= 63 and _DNS1123_LABEL.search(ns)):
            run.add("metadata.namespace", f"Invalid value: {ns!r}: a lowercase RFC 1123 label")

    def _check_schema(self, schema: Mapping, value: Any, path: str, run: _Run) -> None:
        if not _type_ok(schema, value):
            want = "integer or string" if schema.get("x-kubernetes-int-or-string") else schema.get("type")
            run.add(path, f"must be of type {want} (got {_type_name(value)} {value!r})", blocking=True)
            return
        if "enum" in schema and value not in schema["enum"]:
            supported = ", ".join(f'"{v}"' for v in schema["enum"])
            run.add(path, f"Unsupported value: {value!r}: supported values: {supported}", blocking=True)
        if _is_int(value) or isinstance(value, float):
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
                    run.add(_join(path, key), "Required value")
            props = schema.get("properties") or {}
            extra = schema.get("additionalProperties")
            for key, sub in value.items():
                if key in props:
                    self._check_schema(props[key], sub, _join(path, key), run)
                elif isinstance(extra, Mapping):
                    self._check_schema(extra, sub, _join(path, key), run)
        if isinstance(value, list):
            if "minItems" in schema and len(value) < schema["minItems"]:
                run.add(path, f"should have at least {schema['minItems']} items")
            if "maxItems" in schema and len(value) > schema["maxItems"]:
                run.add(path, f"must have at most {schema['maxItems']} items")
            items = schema.get("items")
            if isinstance(items, Mapping):
                for i, item in enumerate(value):
                    self._check_schema(items, item, f"{path}[{i}]", run)
            _check_list_type(schema, value, path, run)

    def _check_rules(self, schema: Mapping, value: Any, old: Any, path: str, run: _Run, root: bool = False) -> None:
        rules = schema.get("x-kubernetes-validations") or ()
        if rules:
            self_value = _root_view(value) if root else value
            old_view = (_root_view(old) if root else old) if old is not _MISSING else _MISSING
            for r in rules:
                self._eval_rule(r, self_value, old_view, path, run)
        if isinstance(value, dict):
            props = schema.get("properties") or {}
            extra = schema.get("additionalProperties")
            for key, sub in value.items():
                sub_schema = props.get(key, extra if isinstance(extra, Mapping) else None)
                if sub_schema is not None:
                    old_sub = old.get(key, _MISSING) if isinstance(old, dict) else _MISSING
                    self._check_rules(sub_schema, sub, old_sub, _join(path, key), run)
        elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
            for i, (item, old_item) in enumerate(_correlate(schema, value, old)):
                self._check_rules(schema["items"], item, old_item, f"{path}[{i}]", run)

    def _eval_rule(self, r: Mapping, value: Any, old: Any, path: str, run: _Run) -> None:
        rule = r["rule"]
        where = path
        if r.get("fieldPath"):
            where = (path + r["fieldPath"]) if path else r["fieldPath"].lstrip(".")
        activation = {"self": celpy.json_to_cel(value)}
        if _OLD_SELF.search(rule):
            if old is _MISSING:
                return  # a transition rule needs an old value at this very node
            activation["oldSelf"] = celpy.json_to_cel(old)
        try:
            program = self._program(rule)
        except Exception as exc:  # noqa: BLE001
            run.add(path, f"rule {rule!r} does not compile: {_one_line(exc)}")
            return
        try:
            result = program.evaluate(activation)
        except Exception as exc:  # noqa: BLE001 - celpy raises CELEvalError and friends
            result = exc
        if isinstance(result, celpy.celtypes.BoolType) or isinstance(result, bool):
            if not result:
                run.add(where, self._message(r, activation, rule))
            return
        run.add(where, f"rule {rule!r} could not be evaluated: {_one_line(result)}")

    def _message(self, r: Mapping, activation: dict, rule: str) -> str:
        if r.get("messageExpression"):
            try:
                text = self._program(r["messageExpression"]).evaluate(activation)
                if isinstance(text, str) and text.strip():
                    return str(text)
            except Exception:  # noqa: BLE001 - the API server falls back to message
                pass
        return r.get("message") or f"failed rule: {rule}"


@functools.lru_cache(maxsize=None)
def load(path: str = str(CRD_PATH)) -> CRDValidator:
    """The project's CRD, parsed once per test session."""
    return CRDValidator.from_file(path)


def _one_line(exc: Any) -> str:
    if isinstance(exc, celpy.CELEvalError) and exc.args:
        exc = exc.args[0]
    return " ".join(str(exc).split())


def _root_view(obj: Any) -> Any:
    """What root rules see: metadata is reduced to name and generateName."""
    if not isinstance(obj, dict):
        return obj
    view = dict(obj)
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        view["metadata"] = {k: meta[k] for k in ("name", "generateName") if k in meta}
    return view


def _preserves(schema: Mapping) -> bool:
    return bool(schema.get("x-kubernetes-preserve-unknown-fields"))


def _prune_nulls(schema: Mapping, value: Any) -> Any:
    """Drop nulls of non-nullable object fields (the API server does it before defaulting)."""
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        out = {}
        for key, sub in value.items():
            sub_schema = props.get(key, extra if isinstance(extra, Mapping) else None)
            if sub is None and (sub_schema is None or not sub_schema.get("nullable")):
                if sub_schema is not None or not _preserves(schema):
                    continue
            out[key] = _prune_nulls(sub_schema, sub) if sub_schema is not None else sub
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [_prune_nulls(schema["items"], item) for item in value]
    return value


def _apply_defaults(schema: Mapping, value: Any) -> None:
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for key, sub in props.items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
        extra = schema.get("additionalProperties")
        for key, sub_value in value.items():
            sub_schema = props.get(key, extra if isinstance(extra, Mapping) else None)
            if sub_schema is not None:
                _apply_defaults(sub_schema, sub_value)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for item in value:
            _apply_defaults(schema["items"], item)


def _unknown_fields(schema: Mapping, value: Any, path: str, root: bool = False) -> Iterator[str]:
    """Fields the schema does not know, as strict field validation reports them."""
    if isinstance(value, dict) and schema.get("type") == "object" and not _preserves(schema):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, sub in value.items():
            if root and key == "metadata":
                continue  # ObjectMeta is decoded (and checked) by the API machinery itself
            if key in props:
                yield from _unknown_fields(props[key], sub, _join(path, key))
            elif isinstance(extra, Mapping):
                yield from _unknown_fields(extra, sub, _join(path, key))
            elif extra is not True:
                yield _join(path, key)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            yield from _unknown_fields(schema["items"], item, f"{path}[{i}]")


def _map_key(schema: Mapping, item: Any) -> tuple | None:
    keys = schema.get("x-kubernetes-list-map-keys") or ()
    if not isinstance(item, dict):
        return None
    return tuple(repr(item.get(k)) for k in keys)


def _check_list_type(schema: Mapping, value: list, path: str, run: _Run) -> None:
    kind = schema.get("x-kubernetes-list-type")
    if kind not in ("map", "set"):
        return
    seen: set = set()
    for i, item in enumerate(value):
        key = _map_key(schema, item) if kind == "map" else repr(item)
        if key is None:
            continue
        if key in seen:
            shown = ({k: item.get(k) for k in schema.get("x-kubernetes-list-map-keys") or ()}
                     if kind == "map" else item)
            run.add(f"{path}[{i}]", f"Duplicate value: {shown!r}")
        seen.add(key)


def _correlate(schema: Mapping, value: list, old: Any) -> Iterator[tuple[Any, Any]]:
    """Pairs (item, old item); only map lists correlate items across an update."""
    by_key: dict = {}
    if schema.get("x-kubernetes-list-type") == "map" and isinstance(old, list):
        by_key = {_map_key(schema, o): o for o in old if _map_key(schema, o) is not None}
    for item in value:
        key = _map_key(schema, item) if by_key else None
        yield item, by_key.get(key, _MISSING) if key is not None else _MISSING
