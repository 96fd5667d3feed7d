"""How deep and how big a DDPJob's spec may be: checked first, before anything walks it.

The CRD leaves three parts of a spec free-form (the template, each env entry's
`valueFrom`, the checkpoint volume), and the API server stores up to 10,000 levels of
nesting there: a cheap object to send, and one that Python code walking it recursively
(deep copies, diffs, the template's type check) would die on. No real Pod template
nests half as deep as MAX_NESTING (the deepest, an affinity term's values, is 11 levels
below `template`); the chart's admission policy (manifests/policy/) refuses the same
bound at the API server, and the job file reader bounds a file (api/job_file.py).

A spec is also at most MAX_SPEC_BYTES of JSON: the operator's framework keeps a copy of
the last handled spec in an annotation, and a job's annotations are at most 256 KiB in
all (`kubectl apply` keeps another copy there). Users: `spec.parse_job` (so `ddpjob
validate`, `submit` and the operator), the operator's kopf bookkeeping (handlers.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from ddpjob.api.errors import FieldError

MAX_NESTING = 32  # levels of maps and lists below a free-form root
MAX_SPEC_BYTES = 100 * 1024  # two copies and the rest of the metadata fit in 256 KiB
ANNOTATIONS_LIMIT = 256 * 1024  # the API server's total for one object (TotalAnnotationSizeLimitB)


def nesting(value: Any) -> int:
    """Levels of maps and lists in `value` (a scalar: 0, `{}`: 1), level by level: no
    recursion, whatever the depth."""
    depth, level = 0, [value]
    while True:
        containers = [v for v in level if isinstance(v, (Mapping, list))]
        if not containers:
            return depth
        depth += 1
        level = [c for v in containers for c in (v.values() if isinstance(v, Mapping) else v)]


def free_form(spec: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """(path, value) of each free-form part of a spec."""
    yield "spec.template", spec.get("template")
    checkpoint = spec.get("checkpoint")
    if isinstance(checkpoint, Mapping):
        yield "spec.checkpoint.volume", checkpoint.get("volume")
    env = spec.get("env")
    for i, entry in enumerate(env if isinstance(env, list) else []):
        if isinstance(entry, Mapping):
            yield f"spec.env[{i}].valueFrom", entry.get("valueFrom")


def check(spec: Mapping[str, Any]) -> list[FieldError]:
    """Errors for a spec too deep or too big to be read any further."""
    errors = [
        FieldError(path, f"is nested deeper than {MAX_NESTING} levels (no Pod template needs half as many)")
        for path, value in free_form(spec)
        if nesting(value) > MAX_NESTING
    ]
    # The rest of a spec has a schema (the CRD's; a file's depth is bounded by its loader):
    # the free-form parts sit at most 3 levels down (spec.env[i].valueFrom).
    if errors or nesting(spec) > MAX_NESTING + 3:
        return errors or [FieldError("spec", f"is nested deeper than {MAX_NESTING + 3} levels")]
    size = len(json.dumps(spec, separators=(",", ":"), default=str))
    if size > MAX_SPEC_BYTES:
        return [
            FieldError(
                "spec",
                f"is {size // 1024} KiB of JSON; at most {MAX_SPEC_BYTES // 1024} KiB "
                "(the operator keeps a copy of it in an annotation, and a job's annotations "
                "are 256 KiB in all): move large data into a ConfigMap or the image",
            )
        ]
    return []
