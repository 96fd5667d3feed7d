"""The fields each resource can be selected by (`?fieldSelector=`), beyond metadata.name
and metadata.namespace, as the API server defines them per resource:

- events: pkg/registry/core/event/strategy.go, ToSelectableFields (what
  `kubectl describe` sends: `involvedObject.name=...,involvedObject.namespace=...,
  involvedObject.uid=...`);
- pods: pkg/registry/core/pod/strategy.go, ToSelectableFields (+ PodToSelectableFields).
Any other field is refused with 400, as the API server does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SELECTABLE: dict[str, frozenset[str]] = {
    "events": frozenset(
        {
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        }
    ),
    "pods": frozenset(
        {
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        }
    ),
}


def selectable(plural: str | None) -> frozenset[str]:
    return SELECTABLE.get(plural or "", frozenset())


def value(obj: Mapping[str, Any], field: str) -> str:
    """The field's value as the API server compares it: a string, '' when unset."""
    if field == "source":  # the event's source component, else its reporting controller
        return str((obj.get("source") or {}).get("component") or obj.get("reportingController") or "")
    current: Any = obj
    for part in field.split("."):
        current = current.get(part) if isinstance(current, Mapping) else None
    if isinstance(current, bool):
        return "true" if current else "false"  # spec.hostNetwork
    return "" if current is None else str(current)
