"""Type checks inside a job's `template`, against the Kubernetes API's own types.

The CRD keeps `template` free-form (x-kubernetes-preserve-unknown-fields), so nothing
else checks it before the operator merges it into a Pod; a wrong type there
(`containers` given as a map, `env` as a string) would otherwise surface as a refused
Pod long after `kubectl apply` said yes. The types come from the official `kubernetes`
client's generated models (`V1PodTemplateSpec.openapi_types`, generated from the API's
OpenAPI document), written out as data by `hack/template_types.py` into `template_types.json`
(a test keeps it equal to the pinned client's), so there is no second schema to keep in
step by hand, and no client is imported to check a template: the operator's image ships
no official client, and the CLI and the operator check against the same release.

Two corrections to the generated types, because they lose information: Quantity values
(`resources.limits`, `emptyDir.sizeLimit`, ...) are typed `str` but the API accepts
numbers too, and IntOrString fields are typed `object`.
"""

from __future__ import annotations

import functools
import json
import pathlib
import re
from collections.abc import Mapping
from typing import Any

from ddpjob.api import field_names
from ddpjob.api.errors import FieldError

BASE = "spec.template"
MAX_ERRORS = 20  # a file that is wrong everywhere gets the first ones, not thousands
# Fields whose values are resource.Quantity (int, float or string in YAML).
QUANTITY_MAPS = {"limits", "requests", "overhead"}
QUANTITY_FIELDS = {"sizeLimit", "storage"}
_LIST = re.compile(r"^List\[(.+)\]$")
_DICT = re.compile(r"^Dict\[str, (.+)\]$")


Types = Mapping[str, Mapping[str, str]]  # model -> its JSON field -> the field's type


@functools.cache
def _types() -> Types:
    data = json.loads((pathlib.Path(__file__).parent / "template_types.json").read_text())
    types: Types = data["types"]
    return types


def _kind(value: Any) -> str:
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
    }.get(type(value), type(value).__name__)


def _check(types: Types, type_name: str, value: Any, path: str, key: str, errors: list[FieldError]) -> None:
    if len(errors) >= MAX_ERRORS or value is None:
        return
    if m := _LIST.match(type_name):
        if not isinstance(value, list):
            errors.append(FieldError(path, f"must be a list (got {_kind(value)})"))
            return
        for i, item in enumerate(value):
            _check(types, m.group(1), item, f"{path}[{i}]", key, errors)
        return
    if m := _DICT.match(type_name):
        if not isinstance(value, Mapping):
            errors.append(FieldError(path, f"must be a map (got {_kind(value)})"))
            return
        inner = "quantity" if key in QUANTITY_MAPS else m.group(1)
        for k, v in value.items():
            _check(
                types,
                inner,
                v,
                f"{path}[{k}]" if not isinstance(k, str) or "." in k or "/" in k else f"{path}.{k}",
                key,
                errors,
            )
        return
    if type_name == "quantity" or (type_name == "str" and key in QUANTITY_FIELDS):
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            errors.append(FieldError(path, f"must be a quantity such as '2' or '4Gi' (got {_kind(value)})"))
        return
    if type_name == "object":  # IntOrString and the like
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            errors.append(FieldError(path, f"must be an integer or a string (got {_kind(value)})"))
        return
    simple = {"str": (str,), "int": (int,), "bool": (bool,), "float": (int, float), "datetime": (str,)}
    if type_name in simple:
        ok = isinstance(value, simple[type_name]) and not (type_name != "bool" and isinstance(value, bool))
        if not ok:
            errors.append(FieldError(path, f"must be {_kind(simple[type_name][0]())} (got {_kind(value)})"))
        return
    fields = types.get(type_name)
    if fields is None:
        return  # a type the models do not describe: left to the API server
    if not isinstance(value, Mapping):
        errors.append(FieldError(path, f"must be an object (got {_kind(value)})"))
        return
    for k, v in value.items():
        if k not in fields:
            kind = type_name[2:] if type_name.startswith("V1") else type_name
            errors.append(
                FieldError(f"{path}.{k}", field_names.unknown_field(k, fields, value, f"unknown field in {kind}"))
            )
            continue
        _check(types, fields[k], v, f"{path}.{k}", k, errors)


def check(template: Any) -> list[FieldError]:
    """Field errors of a PodTemplateSpec, every path under `spec.template`."""
    if template is None:
        return []
    if not isinstance(template, Mapping):
        return [FieldError(BASE, f"must be an object (got {_kind(template)})")]
    errors: list[FieldError] = []
    _check(_types(), "V1PodTemplateSpec", template, BASE, "", errors)
    return errors[:MAX_ERRORS]
