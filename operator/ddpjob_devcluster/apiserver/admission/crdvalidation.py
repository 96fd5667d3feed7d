"""Custom resources validated against their CRD at create and update, as the API server does.

Upstream: staging/src/k8s.io/apiextensions-apiserver/pkg/registry/customresource/
strategy.go (Validate, ValidateUpdate: the structural schema, then the CEL
x-kubernetes-validations, transition rules only on update) and field pruning/validation
(https://kubernetes.io/docs/concepts/extend-kubernetes/api-extension/custom-resources/#field-pruning,
https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation). The
checks themselves are `crd_validator.CRDValidator`'s; this module only puts them in the
request path:

- `?fieldValidation=Strict` (what kubectl sends by default) makes unknown fields a
  400 `strict decoding error: unknown field "spec.foo"`; otherwise they are pruned;
- defaults are applied to what is stored;
- any other error is 422 `DDPJob.ddpjob.io "x" is invalid: <errors>`;
- writes to the status subresource are not validated here (the validator checks the
  main resource only).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ddpjob_devcluster.apiserver.crd_validator import CRDValidator
from ddpjob_devcluster.apiserver.errors import ApiError
from ddpjob_devcluster.apiserver.registry.plaindata import fresh
from ddpjob_devcluster.apiserver.structural_schema import CRDError

_SEGMENT = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _drop(obj: Any, path: str) -> None:
    """Remove the field at a validator path such as `spec.env[1].foo`."""
    parts = [m.group(1) if m.group(1) is not None else int(m.group(2)) for m in _SEGMENT.finditer(path)]
    node = obj
    for part in parts[:-1]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return
    if isinstance(node, dict):
        node.pop(parts[-1], None)


def _at(obj: Any, path: str) -> Any:
    node = obj
    for m in _SEGMENT.finditer(path):
        part: Any = m.group(1) if m.group(1) is not None else int(m.group(2))
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return _ABSENT
    return node


_ABSENT = object()


def _ratchet(errors: list[CRDError], obj: Any, old: Any) -> list[CRDError]:
    """Validation ratcheting (KEP-4008, on by default since 1.30): on update, an error at a
    field whose value did not change is not an error (the API server returns a warning),
    so an object stored under older rules can still get its metadata or status changed."""
    return [e for e in errors if _at(obj, e.path) is _ABSENT or _at(obj, e.path) != _at(old, e.path)]


def _unknown(errors: list[CRDError]) -> bool:
    return bool(errors) and all(e.message.startswith("unknown field") for e in errors)


def admit(
    validator: CRDValidator, body: Mapping[str, Any], old: Mapping[str, Any] | None, params: Mapping[str, str]
) -> dict[str, Any]:
    """The object to store (pruned, defaulted), or the API server's refusal."""
    obj = dict(body)
    errors = validator.validate(obj, old)
    if _unknown(errors):
        if params.get("fieldValidation") == "Strict":
            raise ApiError(400, "BadRequest", "strict decoding error: " + ", ".join(e.message for e in errors))
        obj = fresh(obj)
        for e in errors:
            _drop(obj, e.path)
        errors = validator.validate(obj, old)
    if old is not None:
        errors = _ratchet(errors, validator.defaulted(obj), validator.defaulted(old))
    if errors:
        name = (obj.get("metadata") or {}).get("name", "")
        kind = f"{validator.kind}.{validator.group}"
        # A root-level CEL rule's message names its field itself (a real server writes the path first).
        texts = [e.message if e.message.startswith(e.path + ":") else str(e) for e in errors]
        agg = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
        raise ApiError(
            422,
            "Invalid",
            f'{kind} "{name}" is invalid: {agg}',
            {
                "name": name,
                "group": validator.group,
                "kind": validator.kind,
                "causes": [{"reason": "FieldValueInvalid", "message": e.message, "field": e.path} for e in errors],
            },
        )
    out = validator.defaulted(obj)
    if "status" in body and validator.has_status_subresource:
        out["status"] = body["status"]  # the store decides what happens to it
    return out
