"""What the operator accepted of the fields a running gang cannot take: `status.acceptedSpec`.

An update to `image`, `command`, `args`, `nodes` (of a rigid job), `nprocPerNode`,
`backend`, `gpusPerNode` or the elastic range would reshape a gang whose Pods were started
with the old values. The CRD's transition rules refuse such updates; the operator checks
again (an API server without the rules, an object stored around them) and fails the job.

It decides against what it accepted itself, never against kopf's
`last-handled-configuration` annotation: every user who may patch a job may rewrite that
annotation, and a forged "old" image there, met by the owner's own change of spec, failed
the owner's job (issue 40). So each status the job logic writes carries a digest of each
such field as the operator accepted it (`fingerprint`), in the status subresource that
only the operator writes; the operator's memory covers the first pass, before a status
is written (observer.py). A job with no accepted digest yet (new, or written by an
operator before this one) accepts what it has.

Users: `job/step.py` (every status of a valid spec), `operator/observer.py` (`changes`,
each reconcile). docs/threat-model.md, "Ownership".
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from ddpjob.api.errors import ImmutableFieldError
from ddpjob.api.spec import DDPJob

FIELD = "acceptedSpec"
ELASTIC = "elastic"


def _digest(value: object) -> str:
    # 128 bits: no user can write the status, so a forger would need a second preimage.
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:32]


_NO_RANGE = _digest(None)


def fingerprint(job: DDPJob) -> dict[str, str]:
    """The digest of each immutable field as the job logic resolved it, by its spec name.
    `nodes` only for a rigid job: an elastic job resizes within its range."""
    values: dict[str, object] = {
        "nprocPerNode": job.nproc_per_node,
        "backend": job.backend_requested,
        "image": job.image,
        "command": list(job.command) if job.command is not None else None,
        "args": list(job.args),
        "gpusPerNode": job.gpus_per_node,
        ELASTIC: dataclasses.asdict(job.elastic) if job.elastic is not None else None,
    }
    if job.elastic is None:
        values["nodes"] = job.nodes
    return {key: _digest(value) for key, value in values.items()}


def changes(accepted: Mapping[str, Any], job: DDPJob) -> list[ImmutableFieldError]:
    """Errors for each field of `job` that differs from what was accepted. A field the
    accepted digest does not name (`nodes` of an elastic job) is not compared."""
    now = fingerprint(job)
    errors = [
        ImmutableFieldError(f"spec.{key}")
        for key, digest in now.items()
        if key != ELASTIC and key in accepted and accepted[key] != digest
    ]
    was = accepted.get(ELASTIC)
    if was is not None and was != now[ELASTIC]:
        # The messages of elastic.immutable_errors, which compares two specs.
        added_or_removed = (was == _NO_RANGE) != (now[ELASTIC] == _NO_RANGE)
        why = "it may not be added or removed" if added_or_removed else "running Pods were started with this range"
        errors.append(ImmutableFieldError("spec.elastic", f"is immutable: {why}"))
    return errors
