"""The emulated API server's errors: a Kubernetes `Status` body, and the checks of a request
body that answer 400 before any object semantics run."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ddpjob_devcluster import object_meta


class ApiError(Exception):
    """An error the server answers with a Kubernetes `Status` body."""

    def __init__(self, code: int, reason: str, message: str, details: Mapping[str, Any] | None = None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, dict(details or {})

    def status_body(self) -> dict[str, Any]:
        return {'apiVersion': 'v1', 'kind': 'Status', 'metadata': {}, 'status': 'Failure',
                'code': self.code, 'reason': self.reason, 'message': self.message, 'details': self.details}


def require_object(body: Any) -> None:
    if not isinstance(body, dict):
        raise ApiError(400, 'BadRequest', 'the request body must be a JSON object')


def decodable(body: Any) -> None:
    """The checks the server's decoder makes of an object's metadata (object_meta.py)."""
    try:
        object_meta.check(body)
    except object_meta.DecodeError as exc:
        raise ApiError(400, 'BadRequest', str(exc)) from None


def parse_rv(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ApiError(400, 'BadRequest', f'invalid resourceVersion: {value!r}') from None
