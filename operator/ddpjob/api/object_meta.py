"""The types of `metadata` as a real API server decodes them.

kube-apiserver decodes every request body into Go structs before anything else, so a
metadata field of the wrong JSON type is a 400 before admission or validation ever run
(apimachinery ObjectMeta; encoding/json's "cannot unmarshal ..."): `metadata.generation:
abc`, a label whose value is a number, an integer outside int64. One rule, two users:
spec.py reports each such field, so `ddpjob validate` refuses what the server refuses
(tests/api/test_object_meta.py sends the same bodies to the real one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

STRINGS = (
    "name",
    "generateName",
    "namespace",
    "uid",
    "resourceVersion",
    "selfLink",
    "creationTimestamp",
    "deletionTimestamp",
)
INTEGERS = ("generation", "deletionGracePeriodSeconds")
STRING_MAPS = ("labels", "annotations")
LISTS = ("finalizers", "ownerReferences", "managedFields")
INT64 = (-(1 << 63), (1 << 63) - 1)


@dataclass(frozen=True)
class Mismatch:
    """A value the server cannot decode: `field` ('' for metadata itself), `key` for a
    value inside a map (a label's), and the Go type it had to be."""

    field: str
    value: Any
    go_type: str
    key: str | None = None

    @property
    def path(self) -> str:
        path = "metadata" + (f".{self.field}" if self.field else "")
        if self.key is None:
            return path
        # As template_types.py names a map's key: a dotted or slashed one in brackets.
        return f"{path}[{self.key}]" if "." in self.key or "/" in self.key else f"{path}.{self.key}"

    @property
    def expected(self) -> str:
        """The type in words, for a field error."""
        return {
            "string": "a string",
            "int64": "an integer (int64)",
            "map[string]string": "a map of strings",
            "array": "a list",
            "v1.ObjectMeta": "an object",
        }[self.go_type]


def _is_int64(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and INT64[0] <= value <= INT64[1]


def mismatches(meta: Any) -> list[Mismatch]:
    """Every field of `metadata` of a type (or, for an integer, a size) the server cannot
    decode; null is always decodable (it is an unset field)."""
    if meta is None:
        return []
    if not isinstance(meta, dict):
        return [Mismatch("", meta, "v1.ObjectMeta")]
    found = []
    for field in STRINGS:
        if meta.get(field) is not None and not isinstance(meta[field], str):
            found.append(Mismatch(field, meta[field], "string"))
    for field in INTEGERS:
        if meta.get(field) is not None and not _is_int64(meta[field]):
            found.append(Mismatch(field, meta[field], "int64"))
    for field in STRING_MAPS:
        value = meta.get(field)
        if value is None:
            continue
        if not isinstance(value, dict):
            found.append(Mismatch(field, value, "map[string]string"))
            continue
        # A null value decodes (encoding/json leaves the string empty); any other non-string does not.
        found += [
            Mismatch(field, item, "string", str(key))
            for key, item in value.items()
            if item is not None and not isinstance(item, str)
        ]
    for field in LISTS:
        if meta.get(field) is not None and not isinstance(meta[field], list):
            found.append(Mismatch(field, meta[field], "array"))
    return found
