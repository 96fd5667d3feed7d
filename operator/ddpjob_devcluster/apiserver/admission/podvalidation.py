"""Pod validation (422 Invalid), as kube-apiserver's pod strategy does before admission.

Upstream: pkg/apis/core/validation/validation.go (ValidatePodCreate, ValidatePodSpec,
validateContainers, ValidateResourceRequirements, validateVolumes, validateVolumeMounts)
and staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go (the DNS-1123
messages). The body is NewInvalid(Kind("Pod"), name, errs): `Pod "x" is invalid: <e>`, or
`[e1, e2]` for several (apimachinery/pkg/util/errors aggregate.Error).

Only the rules a workload like ddpjob's can trip are modelled: names, containers
(name, image, duplicates), restartPolicy, hostname/subdomain, quantities (negative,
requests above limits, extended resources needing equal limits), volume names and
volume mounts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from ddpjob.api.quantity import parse_quantity
from ddpjob_devcluster.apiserver.errors import ApiError

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
RESTART_POLICIES = ("Always", "OnFailure", "Never")
# Resources the API server lets a Pod overcommit; any other (nvidia.com/gpu, hugepages-*)
# needs requests == limits (IsOvercommitAllowed in pkg/apis/core/helper).
OVERCOMMIT = ("cpu", "memory", "ephemeral-storage")


def _q(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else ("null" if value is None else str(value))


def _invalid(path: str, value: Any, detail: str = "") -> str:
    return f"{path}: Invalid value: {_q(value)}" + (f": {detail}" if detail else "")


def _quantity(value: Any) -> Decimal | None:
    try:
        return parse_quantity(value)
    except (ValueError, TypeError):
        return None


def _resources(path: str, resources: Mapping[str, Any], errs: list[str]) -> None:
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    for kind, values in (("requests", requests), ("limits", limits)):
        for name, value in values.items():
            q = _quantity(value)
            if q is None:
                errs.append(_invalid(f"{path}.{kind}[{name}]", value, "must be a valid quantity"))
            elif q < 0:
                errs.append(_invalid(f"{path}.{kind}[{name}]", value, "must be greater than or equal to 0"))
    for name, value in requests.items():
        req, lim = _quantity(value), _quantity(limits.get(name)) if name in limits else None
        if req is None:
            continue
        if name in OVERCOMMIT:
            if lim is not None and req > lim:
                errs.append(
                    _invalid(f"{path}.requests", value, f"must be less than or equal to {name} limit of {limits[name]}")
                )
        elif lim is None:
            errs.append(f"{path}.limits: Required value: Limit must be set for non overcommitable resources")
        elif req != lim:
            errs.append(_invalid(f"{path}.requests", value, f"must be equal to {name} limit of {limits[name]}"))


def _containers(spec: Mapping[str, Any], volumes: set[str], errs: list[str]) -> None:
    seen: set[str] = set()
    for field in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(field) or []):
            path = f"spec.{field}[{i}]"
            name = c.get("name")
            if not name:
                errs.append(f"{path}.name: Required value")
            elif not _LABEL.match(name) or len(name) > 63:
                errs.append(_invalid(f"{path}.name", name, LABEL_MSG))
            elif name in seen:
                errs.append(f'{path}.name: Duplicate value: "{name}"')
            seen.add(name or "")
            if not c.get("image"):
                errs.append(f"{path}.image: Required value")
            _resources(f"{path}.resources", c.get("resources") or {}, errs)
            paths: set[str] = set()
            for j, m in enumerate(c.get("volumeMounts") or []):
                mpath = f"{path}.volumeMounts[{j}]"
                if m.get("name") not in volumes:
                    errs.append(f"{mpath}.name: Not found: {_q(m.get('name'))}")
                if not m.get("mountPath"):
                    errs.append(f"{mpath}.mountPath: Required value")
                elif m["mountPath"] in paths:
                    errs.append(_invalid(f"{mpath}.mountPath", m["mountPath"], "must be unique"))
                paths.add(m.get("mountPath") or "")


def errors(pod: Mapping[str, Any]) -> list[str]:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    errs: list[str] = []
    name = meta.get("name") or ""
    if name and (not _SUBDOMAIN.match(name) or len(name) > 253):
        errs.append(_invalid("metadata.name", name, SUBDOMAIN_MSG))
    volumes: set[str] = set()
    for i, v in enumerate(spec.get("volumes") or []):
        vname = v.get("name")
        if not vname:
            errs.append(f"spec.volumes[{i}].name: Required value")
        elif not _LABEL.match(vname):
            errs.append(_invalid(f"spec.volumes[{i}].name", vname, LABEL_MSG))
        elif vname in volumes:
            errs.append(f'spec.volumes[{i}].name: Duplicate value: "{vname}"')
        volumes.add(vname or "")
    if not spec.get("containers"):
        errs.append("spec.containers: Required value")
    _containers(spec, volumes, errs)
    policy = spec.get("restartPolicy", "Always")
    if policy not in RESTART_POLICIES:
        errs.append(
            f"spec.restartPolicy: Unsupported value: {_q(policy)}: supported values: "
            + ", ".join(f'"{p}"' for p in RESTART_POLICIES)
        )
    for field in ("hostname", "subdomain"):
        value = spec.get(field)
        if value and (not _LABEL.match(value) or len(value) > 63):
            errs.append(_invalid(f"spec.{field}", value, LABEL_MSG))
    return list(dict.fromkeys(errs))  # ToAggregate drops duplicate messages


def validate(pod: Mapping[str, Any]) -> None:
    errs = errors(pod)
    if not errs:
        return
    name = (pod.get("metadata") or {}).get("name", "")
    agg = errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"
    raise ApiError(
        422,
        "Invalid",
        f'Pod "{name}" is invalid: {agg}',
        {
            "name": name,
            "kind": "Pod",
            "causes": [
                {"reason": "FieldValueInvalid", "message": e.split(": ", 1)[1], "field": e.split(": ", 1)[0]}
                for e in errs
            ],
        },
    )
