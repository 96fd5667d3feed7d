"""The emulated API server's errors: a Kubernetes `Status` body, and the checks of a request
body that answer 400 before any object semantics run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ddpjob.api import object_meta

_JSON = {str: "string", int: "number", float: "number", bool: "bool", list: "array", dict: "object"}


class ApiError(Exception):
    """An error the server answers with a Kubernetes `Status` body."""

    def __init__(self, code: int, reason: str, message: str, details: Mapping[str, Any] | None = None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, dict(details or {})

    def status_body(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Status",
            "metadata": {},
            "status": "Failure",
            "code": self.code,
            "reason": self.reason,
            "message": self.message,
            "details": self.details,
        }


def require_object(body: Any) -> None:
    if not isinstance(body, dict):
        raise ApiError(400, "BadRequest", "the request body must be a JSON object")


def decodable(body: Any) -> None:
    """The checks the server's decoder makes of an object's metadata (ddpjob.api.object_meta),
    answered as kube-apiserver answers them: encoding/json's message in a 400."""
    if not isinstance(body, dict):
        return
    found = object_meta.mismatches(body.get("metadata"))
    if not found:
        return
    first, kind = found[0], str(body.get("kind") or "object")
    seen = "null" if first.value is None else _JSON.get(type(first.value), type(first.value).__name__)
    if first.go_type == "int64" and seen == "number":
        seen = f"number {first.value}"  # Go names a number that does not fit
    field = f"Go struct field ObjectMeta.metadata.{first.field}" if first.field else "Go struct field"
    raise ApiError(
        400,
        "BadRequest",
        f"{kind} cannot be handled as a {kind}: json: cannot unmarshal {seen} into {field} of type {first.go_type}",
    )


def parse_rv(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ApiError(400, "BadRequest", f"invalid resourceVersion: {value!r}") from None
