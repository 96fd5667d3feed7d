"""kopf's copy of the last handled spec (its "diff base"), kept where it always fits.

kopf stores the "essence" of each handled object (spec, labels, annotations) as JSON in
an annotation, to tell what an update changed. Three things here:

- Pods: only DDPJobs have handlers that use it (on.create/update/resume); Pods have only
  an index and on.event, so theirs is empty: 1 to 2 ms saved per Pod event, which a
  1,024-Pod gang pays in every phase.
- The spec only: a change of a job's labels or annotations is no change to kopf (no
  handler acts on them), so it costs no handling and no patch.
- Room: a job's annotations are at most 256 KiB in all, the copy included. A copy that
  would not fit (a huge spec, or large annotations of the user's) made kopf's patch fail
  with 422 and retry for ever. Such a copy is replaced by a digest of the spec, under
  `spec`, so kopf still sees a change of spec as a change, and the operator refuses a
  spec over `api/bounds.py`'s limit with one status message.

Nothing is decided from this copy: any user who may patch a job may rewrite it. The
operator judges immutable fields against what it accepted (api/accepted_spec.py), and
the chart's admission policy refuses writes of `ddpjob.io/*` annotations by anyone who
may not write the job's status.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import kopf

from ddpjob.api import bounds, names

DIGEST = f"{names.GROUP}/digest"
# kopf's own progress annotations (a few hundred bytes per handler) go in the same patch.
KOPF_ROOM = 8 * 1024


class DiffBaseStorage(kopf.AnnotationsDiffBaseStorage):
    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> Any:
        if body.get("kind") == "Pod" and body.get("apiVersion") == "v1":
            return {}
        essence = super().build(body=body, extra_fields=extra_fields)
        # The spec only: kopf counts a change of labels or annotations as a change of the
        # object, and a DDPJob's metadata is anyone's with `patch`. No handler here acts on
        # it, yet each such write cost a handling and a patch of this copy, so one tenant's
        # label writes were the operator's writes (docs/benchmarks.md, one tenant against
        # the others).
        essence.pop("metadata", None)
        if _size(essence) + _others(body.get("metadata") or {}) + KOPF_ROOM <= bounds.ANNOTATIONS_LIMIT:
            return essence
        return {"spec": {DIGEST: hashlib.sha256(_json(essence.get("spec")).encode()).hexdigest()}}


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def _size(essence: Any) -> int:
    return len(_json(essence).encode())


def _others(metadata: Mapping[str, Any]) -> int:
    """Bytes of the annotations that are not kopf's (ours: under the operator's group)."""
    annotations = metadata.get("annotations") or {}
    return sum(
        len(str(k).encode()) + len(str(v).encode())
        for k, v in annotations.items()
        if not str(k).startswith(f"{names.GROUP}/")
    )
