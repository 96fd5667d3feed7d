"""How a PATCH body applies to a stored object: JSON patch (RFC 6902) and merge patch (RFC 7386).

A strategic merge patch is applied as a merge patch: lists are replaced, not merged by
their keys as the real server's strategic merge does.
"""

from __future__ import annotations

from typing import Any

import jsonpatch

from ddpjob_devcluster.apiserver.errors import ApiError, require_object
from ddpjob_devcluster.apiserver.registry.plaindata import fresh

JSON_PATCH = "application/json-patch+json"
MERGE_PATCHES = ("application/merge-patch+json", "application/strategic-merge-patch+json", "application/json", "")


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (also used for strategic merge patch, see above)."""
    if not isinstance(patch, dict):
        return fresh(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def apply_patch(current: dict[str, Any], content_type: str, body: Any) -> dict[str, Any]:
    if content_type == JSON_PATCH:
        try:
            return jsonpatch.apply_patch(current, body)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
            raise ApiError(422, "Invalid", f"the json patch cannot be applied: {exc}") from None
    if content_type in MERGE_PATCHES:
        require_object(body)
        return merge_patch(current, body)
    raise ApiError(415, "UnsupportedMediaType", f"the patch type {content_type!r} is not supported")
