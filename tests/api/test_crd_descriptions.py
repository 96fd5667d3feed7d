"""`kubectl explain ddpjob.<field>` says what every field means: each field of the CRD's
schema (spec, status, and every field below them, and the object itself) carries a
description. The one exception is `metadata`: the API server forbids anything but its
type there, and publishes ObjectMeta's own description in its place."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tests.conftest import project_crd


def fields(schema: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(path, schema) of every named field, at any depth, list items' fields included."""
    for name, child in (schema.get("properties") or {}).items():
        yield f"{path}.{name}", child
        yield from fields(child, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from fields(schema["items"], f"{path}[]")


def undescribed(schema: dict[str, Any]) -> list[str]:
    found = [] if schema.get("description") else ["<the object>"]
    return found + [
        path
        for path, child in fields(schema, "ddpjob")
        if path != "ddpjob.metadata" and not str(child.get("description") or "").strip()
    ]


def test_every_field_of_the_crd_has_a_description() -> None:
    schema = project_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert undescribed(schema) == []


def test_the_check_finds_a_field_without_one() -> None:
    schema = {
        "type": "object",
        "description": "x",
        "properties": {
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "description": "s",
                "properties": {
                    "args": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}}
                },
            },
        },
    }
    assert undescribed(schema) == ["ddpjob.spec.args", "ddpjob.spec.args[].name"]
