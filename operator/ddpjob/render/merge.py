"""Merge a user's PodTemplateSpec under the Pod the operator renders.

What the operator sets wins (names, restart policy, the rendezvous env, its volumes);
everything else the user gives is kept: nodeSelector, tolerations, affinity,
schedulerName, priorityClassName, securityContext, extra volumes, sidecars, and extra
settings of the `trainer` container itself (probes, volumeMounts, securityContext).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from ddpjob.api import names

Combine = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]


def _merge_named(
    user: list[dict[str, Any]],
    ours: list[dict[str, Any]],
    combine: Combine | None = None,
) -> list[dict[str, Any]]:
    """Lists keyed by name: ours replace the user's entry of the same name, order kept."""
    ours_by_name = {item["name"]: item for item in ours}
    merged: list[dict[str, Any]] = []
    for item in user:
        name = item.get("name")
        if name in ours_by_name:
            mine = ours_by_name.pop(name)
            merged.append(combine(item, mine) if combine else mine)
        else:
            merged.append(item)
    return merged + list(ours_by_name.values())


# Fields the operator only defaults (the restricted Pod Security Standard): the user's
# template wins, field by field; an operator-side template policy decides what is allowed.
USER_OVERRIDABLE_POD = ("securityContext", "automountServiceAccountToken")


def _with_defaults(ours: Any, user: Any) -> Any:
    if isinstance(ours, dict) and isinstance(user, dict):
        return {**ours, **user}
    return user if user is not None else ours


def _secure(container: dict[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """A container with the restricted securityContext defaults under its own settings."""
    return {**container, "securityContext": _with_defaults(dict(defaults), container.get("securityContext"))}


def _merge_trainer(user: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    # Our keys first (readable `kubectl get -o yaml`), then whatever else the user set.
    out = {**ours, **{k: v for k, v in user.items() if k not in ours}}
    if "securityContext" in ours:
        out["securityContext"] = _with_defaults(ours["securityContext"], user.get("securityContext"))
    # The user's extra env comes after the contract; the spec already forbids reserved names.
    out["env"] = ours.get("env", []) + [
        e for e in user.get("env", []) if e.get("name") not in {o["name"] for o in ours.get("env", [])}
    ]
    out["volumeMounts"] = _merge_named(user.get("volumeMounts", []), ours.get("volumeMounts", []))
    out["ports"] = ours.get("ports", []) + [
        p
        for p in user.get("ports", [])
        if p.get("containerPort") not in {q["containerPort"] for q in ours.get("ports", [])}
    ]
    res = copy.deepcopy(user.get("resources") or {})
    for key, values in (ours.get("resources") or {}).items():
        res.setdefault(key, {}).update(values)
    out["resources"] = res
    return out


def merge_pod_template(pod: dict[str, Any], template: Mapping[str, Any] | None) -> dict[str, Any]:
    if not template:
        return pod
    template = copy.deepcopy(dict(template))
    merged = copy.deepcopy(pod)
    user_meta = template.get("metadata") or {}
    for key in ("labels", "annotations"):
        if user_meta.get(key):
            merged["metadata"][key] = {**user_meta[key], **merged["metadata"].get(key, {})}
    user_spec = dict(template.get("spec") or {})
    ours = merged["spec"]
    spec = {**ours, **{k: v for k, v in user_spec.items() if k not in ours}}
    for key in USER_OVERRIDABLE_POD:
        if key in user_spec:
            spec[key] = _with_defaults(ours.get(key), user_spec[key])
    defaults = (
        next((c.get("securityContext") for c in ours["containers"] if c["name"] == names.TRAINER_CONTAINER), None) or {}
    )
    user_containers = [
        c if c.get("name") == names.TRAINER_CONTAINER else _secure(c, defaults) for c in user_spec.get("containers", [])
    ]
    spec["containers"] = _merge_named(user_containers, ours["containers"], _merge_trainer)
    if user_spec.get("initContainers"):
        spec["initContainers"] = [_secure(c, defaults) for c in user_spec["initContainers"]]
    # The trainer container goes first so `kubectl logs` picks it by default.
    spec["containers"].sort(key=lambda c: c.get("name") != names.TRAINER_CONTAINER)
    spec["volumes"] = _merge_named(user_spec.get("volumes", []), ours.get("volumes", []))
    merged["spec"] = spec
    return merged
