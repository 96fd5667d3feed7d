"""Shared data and helpers for the emulator's own tests."""

from __future__ import annotations

import kubernetes

from tests.support.deadlines import REACTION

WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            }
        ],
    },
}


def widget(name: str, **spec) -> dict:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


def collect_events(list_fn, count: int, *args, **kwargs) -> list[tuple[str, str]]:
    """The first `count` watch events as (type, name); the server's timeout only guards a hang."""
    watch = kubernetes.watch.Watch()
    events = []
    for event in watch.stream(list_fn, *args, timeout_seconds=int(REACTION), **kwargs):
        obj = event["object"]
        name = obj["metadata"]["name"] if isinstance(obj, dict) else obj.metadata.name
        events.append((event["type"], name))
        if len(events) == count:
            watch.stop()
            break
    return events
