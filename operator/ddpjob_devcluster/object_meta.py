"""The types of `metadata` as a real API server decodes them.

kube-apiserver decodes every request body into Go structs before anything else, so a
metadata field of the wrong JSON type is a 400 before admission or validation ever run
(apimachinery ObjectMeta; the message is encoding/json's "cannot unmarshal ..."). The
emulator stores plain dicts, so it checks the same types here: `metadata.generation:
abc` was accepted by the emulator and refused by a real server (docs/divergences.md).
"""
from __future__ import annotations

from typing import Any

_STRINGS = ('name', 'generateName', 'namespace', 'uid', 'resourceVersion', 'selfLink', 'creationTimestamp',
            'deletionTimestamp')
_INTEGERS = ('generation', 'deletionGracePeriodSeconds')
_STRING_MAPS = ('labels', 'annotations')
_LISTS = ('finalizers', 'ownerReferences', 'managedFields')
_GO = {str: 'string', int: 'number', float: 'number', bool: 'bool', list: 'array', dict: 'object'}


class DecodeError(ValueError):
    """The message of the 400 BadRequest a real server answers."""


def _refuse(kind: str, field: str, value: Any, go_type: str) -> DecodeError:
    seen = 'null' if value is None else _GO.get(type(value), type(value).__name__)
    return DecodeError(f'{kind} cannot be handled as a {kind}: json: cannot unmarshal {seen} '
                       f'into Go struct field ObjectMeta.metadata.{field} of type {go_type}')


def check(body: dict[str, Any]) -> None:
    """Raise DecodeError when `metadata` has a field of a type a real server cannot decode."""
    meta = body.get('metadata')
    kind = str(body.get('kind') or 'object')
    if meta is None:
        return
    if not isinstance(meta, dict):
        raise DecodeError(f'{kind} cannot be handled as a {kind}: json: cannot unmarshal '
                          f'{_GO.get(type(meta), "value")} into Go struct field of type v1.ObjectMeta')
    for field in _STRINGS:
        if field in meta and meta[field] is not None and not isinstance(meta[field], str):
            raise _refuse(kind, field, meta[field], 'string')
    for field in _INTEGERS:
        value = meta.get(field)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise _refuse(kind, field, value, 'int64')
    for field in _STRING_MAPS:
        value = meta.get(field)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise _refuse(kind, field, value, 'map[string]string')
        for item in value.values():
            if not isinstance(item, str):
                raise _refuse(kind, field, item, 'string')
    for field in _LISTS:
        if field in meta and meta[field] is not None and not isinstance(meta[field], list):
            raise _refuse(kind, field, meta[field], 'array')
