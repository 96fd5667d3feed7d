"""What the API says about a bad spec: one `FieldError` per field (its path and what is
wrong), all of them at once in `InvalidSpec`, so a user fixes a file in one pass."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FieldError:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True)
class ImmutableFieldError(FieldError):
    """A change to a field a running gang cannot take (the CRD marks these too)."""

    message: str = "is immutable"


class InvalidSpec(ValueError):
    """Raised with every field error at once, so a user fixes a file in one pass."""

    def __init__(self, errors: list[FieldError]):
        self.errors = errors
        super().__init__("; ".join(str(e) for e in errors))
