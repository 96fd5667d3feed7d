"""Kubernetes label and field selectors, as the API server parses them.

Split out of the emulator because selector parsing is a self-contained grammar:
https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ddpjob_devcluster.apiserver.errors import ApiError

Predicate = Callable[[Mapping[str, str]], bool]

# Set-based requirements: `key in (a,b)`, `key notin (a,b)`.
_SET_RE = re.compile(r"^\s*([^\s!=()]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
# Equality-based requirements: `key=v`, `key==v`, `key!=v`.
_EQ_RE = re.compile(r"^\s*([^\s!=()]+)\s*(==|=|!=)\s*([^\s!=()]*)\s*$")
# Existence requirements: `key`, `!key`.
_EXISTS_RE = re.compile(r"^\s*(!?)\s*([^\s!=()]+)\s*$")


class SelectorError(ValueError):
    """A selector the real API server would reject with 400 BadRequest."""


def _split_requirements(selector: str) -> list[str]:
    # Commas separate requirements, except inside the parentheses of `in (a,b)`.
    parts, depth, current = [], 0, ""
    for char in selector:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [part for part in parts if part.strip()]


def _parse_requirement(text: str) -> Predicate:
    if match := _SET_RE.match(text):
        key, op, raw_values = match.groups()
        values = {value.strip() for value in raw_values.split(",") if value.strip()}
        if op == "in":
            return lambda labels: labels.get(key) in values
        # `notin` matches objects without the key too, as in Kubernetes.
        return lambda labels: labels.get(key) not in values
    if match := _EQ_RE.match(text):
        key, op, value = match.groups()
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: key in labels and labels[key] == value
    if match := _EXISTS_RE.match(text):
        negate, key = match.groups()
        if negate:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise SelectorError(f"unable to parse requirement: {text!r}")


def parse_label_selector(selector: str | None) -> Predicate:
    """Compile `?labelSelector=` into a predicate over an object's labels."""
    predicates = [_parse_requirement(part) for part in _split_requirements(selector or "")]
    return lambda labels: all(predicate(labels) for predicate in predicates)


# The API server supports only a few fields per resource; these two work for every resource.
_SUPPORTED_FIELDS = {"metadata.name", "metadata.namespace"}


def parse_field_selector(selector: str | None, plural: str | None = None) -> Callable[[Mapping[str, Any]], bool]:
    """Compile `?fieldSelector=` into a predicate: metadata.name / metadata.namespace, and
    the resource's own selectable fields (field_selectors.py)."""
    from ddpjob_devcluster.apiserver.registry import field_selectors

    supported = _SUPPORTED_FIELDS | field_selectors.selectable(plural)
    checks: list[tuple[str, str, str]] = []
    for part in _split_requirements(selector or ""):
        match = _EQ_RE.match(part)
        if not match or match.group(1) not in supported:
            raise SelectorError(f"field label not supported: {part!r}")
        checks.append((match.group(1), match.group(2), match.group(3)))

    def predicate(obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        for field, op, value in checks:
            if field in _SUPPORTED_FIELDS:
                actual = meta.get(field.split(".", 1)[1]) or ""
            else:
                actual = field_selectors.value(obj, field)
            if (actual == value) != (op != "!="):
                return False
        return True

    return predicate


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def matcher(params: Mapping[str, str], res: Any = None) -> Callable[[Mapping[str, Any]], bool]:
    """The objects a request's `labelSelector` and `fieldSelector` select; a selector the
    API server would refuse is a 400 BadRequest."""
    try:
        labels_match = parse_label_selector(params.get("labelSelector"))
        fields_match = parse_field_selector(params.get("fieldSelector"), getattr(res, "plural", None))
    except SelectorError as exc:
        raise ApiError(400, "BadRequest", str(exc)) from None
    return lambda obj: labels_match(labels_of(obj)) and fields_match(obj)
