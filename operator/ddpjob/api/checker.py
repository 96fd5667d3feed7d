"""Reading typed values out of a DDPJob body while collecting every bad field
(`FieldError`s with their paths), so a user fixes a file in one pass. spec.py and each
field's own module (scheduling.py, elastic.py, container_fields.py) report through one
`Checker`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ddpjob.api import field_names
from ddpjob.api.errors import FieldError

MESSAGE_LIMIT = 1000  # one error line, whatever the input quoted in it


def show(value: Any, limit: int = 60) -> str:
    """A value as an error message quotes it: short, one line, whatever the input (an
    integer Python will not print, a megabyte of text)."""
    if isinstance(value, str) and len(value) > limit:  # the head only: never the whole megabyte
        return repr(value[:limit])[:limit] + f"... ({len(value)} characters)"
    try:
        text = repr(value)
    except ValueError:  # an integer of more than 4,300 digits (sys.get_int_max_str_digits)
        return (
            f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
            if isinstance(value, int)
            else f"a {type(value).__name__} too large to show"
        )
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


class Checker:
    """Collects field errors while reading typed values out of a mapping."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []
        # Paths an unknown field was said to be a misspelling of: that field is then not
        # also reported missing (`minNode` is one mistake, not two).
        self.meant: set[str] = set()

    def err(self, path: str, message: str) -> None:
        if len(message) > MESSAGE_LIMIT:
            message = message[: MESSAGE_LIMIT - 1] + "…"
        self.errors.append(FieldError(path, message))

    def integer(
        self, spec: Mapping[str, Any], key: str, default: int | None, lo: int, hi: int | None = None
    ) -> int | None:
        path = f"spec.{key}"
        value = default if spec.get(key) is None else spec.get(key)  # null is unset, as the API server prunes it
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.err(path, f"must be an integer (got {show(value)})")
            return None
        if value < lo:
            self.err(path, f"must be >= {lo} (got {show(value)})")
        elif hi is not None and value > hi:
            self.err(path, f"must be <= {hi} (got {show(value)})")
        return value

    def choice(self, spec: Mapping[str, Any], key: str, default: str | None, options: tuple[str, ...]) -> str | None:
        value = default if spec.get(key) is None else spec.get(key)  # null is unset, as the API server prunes it
        if value is None:
            return None
        if value not in options:
            self.err(f"spec.{key}", f"must be one of {', '.join(options)} (got {show(value)})")
            return None
        return value

    def string(
        self, spec: Mapping[str, Any], key: str, default: str | None = None, required: bool = False
    ) -> str | None:
        value = default if spec.get(key) is None else spec.get(key)  # null is unset, as the API server prunes it
        if value is None:
            if required:
                self.missing(f"spec.{key}")
            return None
        if not isinstance(value, str) or (required and not value):
            self.err(f"spec.{key}", f"must be a non-empty string (got {show(value)})")
            return None
        return value

    def strings(self, spec: Mapping[str, Any], key: str) -> tuple[str, ...] | None:
        value = spec.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            self.err(f"spec.{key}", f"must be a list of strings (got {type(value).__name__})")
            return None
        for i, item in enumerate(value):
            if not isinstance(item, str):
                self.err(f"spec.{key}[{i}]", f"must be a string (got {show(item)})")
        return tuple(str(v) for v in value)

    def unknown(self, prefix: str, mapping: Mapping[str, Any], known: Iterable[str]) -> bool:
        """An error per key of `mapping` that is not `known`, naming the field it was
        probably meant as; True when there was one. `prefix`: the mapping's path ("": the root)."""
        known = tuple(known)
        keys = field_names.unknown_keys(mapping, known)
        for key in keys:
            self.err(f"{prefix}.{key}" if prefix else str(key), field_names.unknown_field(key, known, mapping))
            guess = field_names.closest(key, known, mapping)
            if guess:
                self.meant.add(f"{prefix}.{guess}" if prefix else guess)
        return bool(keys)

    def missing(self, path: str, message: str = "is required") -> None:
        """A required field that is not there, unless an unknown field was its misspelling."""
        if path not in self.meant:
            self.err(path, message)

    def mapping(self, spec: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
        value = spec.get(key)
        if value is not None and not isinstance(value, Mapping):
            self.err(f"spec.{key}", f"must be an object (got {type(value).__name__})")
            return None
        return value


def without_nulls(value: Any) -> Any:
    """A null field is an unset field: the API server prunes it before defaulting.

    Not inside free-form objects (template, checkpoint.volume, env[].valueFrom), which
    the CRD keeps as written.
    """
    if isinstance(value, Mapping):
        return {
            k: v if k in ("template", "volume", "valueFrom") else without_nulls(v)
            for k, v in value.items()
            if v is not None
        }
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value
