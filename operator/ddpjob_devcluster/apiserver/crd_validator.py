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

Steps 3 to 6 are the structural schema's (`structural_schema.py`); this module routes,
checks ObjectMeta and runs the CEL rules. Errors are `CRDError(path, message)` tuples;
paths look like Python's FieldError paths:
`spec.env[1].name`, `metadata.name`, `spec`.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import celpy
import re2
import yaml

from ddpjob.api import object_meta
from ddpjob_devcluster.apiserver import cel_library
from ddpjob_devcluster.apiserver.structural_schema import (
    MISSING,
    CRDError,
    Run,
    apply_defaults,
    check_schema,
    correlate,
    join,
    prune_nulls,
    type_name,
    unknown_fields,
)

ROOT = Path(__file__).resolve().parents[3]
CRD_PATH = ROOT / "manifests" / "crd" / "ddpjobs.ddpjob.io.yaml"


_DNS1123_LABEL = re2.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re2.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_OLD_SELF = re.compile(r"\boldSelf\b")


class Rule(NamedTuple):
    path: str  # the schema node the rule sits on, e.g. "spec.nodes" or "" for the root
    rule: str
    message: str | None
    field_path: str | None


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
        self._env = cel_library.ENV
        self._programs: dict[str, celpy.Runner] = {}  # compiled once per rule, for this validator's life

    @classmethod
    def from_file(cls, path: Path | str = CRD_PATH, version: str | None = None) -> CRDValidator:
        return cls(yaml.safe_load(Path(path).read_text()), version)

    # --- the schema's rules ------------------------------------------------------------

    def rules(self) -> list[Rule]:
        """Every x-kubernetes-validations rule with the schema path it sits on."""
        found: list[Rule] = []

        def walk(schema: Mapping, path: str) -> None:
            for r in schema.get("x-kubernetes-validations") or ():
                found.append(Rule(path, r["rule"], r.get("message"), r.get("fieldPath")))
            for key, sub in (schema.get("properties") or {}).items():
                walk(sub, join(path, key))
            if isinstance(schema.get("additionalProperties"), Mapping):
                walk(schema["additionalProperties"], join(path, "*"))
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

    def _program(self, rule: str) -> celpy.Runner:
        if rule not in self._programs:
            self._programs[rule] = self._env.program(self._env.compile(rule), functions=cel_library.FUNCTIONS)
        return self._programs[rule]

    # --- what the API server does to an incoming object --------------------------------

    def defaulted(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """The object with nulls pruned and the schema's defaults applied, as stored."""
        out = copy.deepcopy(dict(obj))
        if self.has_status_subresource:
            out.pop("status", None)
        out = prune_nulls(self.schema, out)
        apply_defaults(self.schema, out)
        return out

    def validate(self, obj: Any, old: Mapping[str, Any] | None = None) -> list[CRDError]:
        """Errors for creating `obj`, or for updating `old` to `obj` when old is given."""
        run = Run()
        if not isinstance(obj, Mapping):
            run.add("", f"must be of type object (got {type_name(obj)})", blocking=True)
            return run.errors
        # The server decodes the body before anything else: metadata of a type it cannot
        # decode is an error on its own.
        for bad in object_meta.mismatches(obj.get("metadata")):
            run.add(bad.path, f"must be of type {bad.go_type} (got {type_name(bad.value)})", blocking=True)
        if run.errors:
            return run.errors
        self._check_routing(obj, run)
        if run.errors:
            return run.errors
        new = self.defaulted(obj)
        for path in unknown_fields(self.schema, new, "", root=True):
            run.add(path, f'unknown field "{path}"')
        if run.errors:
            return run.errors  # strict field validation fails the request on these alone
        old_value = self.defaulted(old) if old is not None else MISSING
        check_schema(self.schema, new, "", run)
        self._check_object_meta(new, run)
        if not run.blocking:
            self._check_rules(self.schema, new, old_value, "", run, root=True)
        return run.errors

    def validate_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[CRDError]:
        return self.validate(new, old)

    def _check_routing(self, obj: Mapping, run: Run) -> None:
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if api_version is None:
            run.add("apiVersion", "Required value: apiVersion not set")
        elif api_version not in self.api_versions:
            run.add(
                "apiVersion",
                f"no matches for apiVersion {api_version!r}: must be one of {', '.join(sorted(self.api_versions))}",
            )
        if kind is None:
            run.add("kind", "Required value: kind not set")
        elif kind != self.kind:
            run.add("kind", f"no matches for kind {kind!r} in group {self.group}: must be {self.kind}")

    def _check_object_meta(self, obj: Mapping, run: Run) -> None:
        """ObjectMeta validation the API server applies to every custom resource."""
        meta = obj.get("metadata")
        if not isinstance(meta, Mapping):
            return  # a type error was already reported, or the field is required elsewhere
        name, generate = meta.get("name"), meta.get("generateName")
        if name is None and generate is None:
            run.add("metadata.name", "Required value: name or generateName is required")
        if isinstance(name, str) and not (len(name) <= 253 and _DNS1123_SUBDOMAIN.search(name)):
            run.add(
                "metadata.name",
                f"Invalid value: {name!r}: a lowercase RFC 1123 subdomain must consist of "
                "lower case alphanumeric characters, '-' or '.'",
            )
        ns = meta.get("namespace")
        if isinstance(ns, str) and not (len(ns) <= 63 and _DNS1123_LABEL.search(ns)):
            run.add("metadata.namespace", f"Invalid value: {ns!r}: a lowercase RFC 1123 label")

    def _check_rules(self, schema: Mapping, value: Any, old: Any, path: str, run: Run, root: bool = False) -> None:
        rules = schema.get("x-kubernetes-validations") or ()
        if rules:
            self_value = _root_view(value) if root else value
            old_view = (_root_view(old) if root else old) if old is not MISSING else MISSING
            for r in rules:
                self._eval_rule(r, self_value, old_view, path, run)
        if isinstance(value, dict):
            props = schema.get("properties") or {}
            extra = schema.get("additionalProperties")
            for key, sub in value.items():
                sub_schema = props.get(key, extra if isinstance(extra, Mapping) else None)
                if sub_schema is not None:
                    old_sub = old.get(key, MISSING) if isinstance(old, dict) else MISSING
                    self._check_rules(sub_schema, sub, old_sub, join(path, key), run)
        elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
            for i, (item, old_item) in enumerate(correlate(schema, value, old)):
                self._check_rules(schema["items"], item, old_item, f"{path}[{i}]", run)

    def _eval_rule(self, r: Mapping, value: Any, old: Any, path: str, run: Run) -> None:
        rule = r["rule"]
        where = path
        if r.get("fieldPath"):
            where = (path + r["fieldPath"]) if path else r["fieldPath"].lstrip(".")
        activation = {"self": celpy.json_to_cel(value)}
        if _OLD_SELF.search(rule):
            if old is MISSING:
                return  # a transition rule needs an old value at this very node
            activation["oldSelf"] = celpy.json_to_cel(old)
        try:
            program = self._program(rule)
        except Exception as exc:  # noqa: BLE001
            run.add(path, f"rule {rule!r} does not compile: {_one_line(exc)}")
            return
        result: object  # a CEL value, or the error that stopped the evaluation
        try:
            result = program.evaluate(activation)
        except Exception as exc:  # noqa: BLE001 - celpy raises CELEvalError and friends
            result = exc
        if isinstance(result, (celpy.celtypes.BoolType, bool)):
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


@functools.cache
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
