"""`ddpjob submit` of a job that already exists: what a second apply can and cannot do.

- A changed immutable field (`spec.args`, `spec.image`, ...; api/spec.py's
  `validate_update`) is refused before anything is sent, in one line with the way out:
  delete the job and submit again. Otherwise the API server answers with a 409 conflict
  when `kubectl apply` owns the field (`conflict with "kubectl-client-side-apply" ...
  .spec.args`) or a 422 from the CRD's rules, neither of which says what to do.
- A 409 over fields another manager owns that may change names that manager and
  `--force-conflicts`.
- A job that has finished is not run again by an apply: its phase stays. Submit says so,
  instead of `--wait` printing `Succeeded` at once as if it had just run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ddpjob.api.errors import ImmutableFieldError
from ddpjob.api.spec import validate_update
from ddpjob.cluster.connection import ClusterError, Connection
from ddpjob.cluster.jobs import TERMINAL, get_job


def existing(conn: Connection, name: str) -> dict[str, Any] | None:
    """The stored job of that name in the connection's namespace, or None (none, or one this
    user may patch but not read: the apply then says what the server says)."""
    try:
        return get_job(conn, name)
    except ClusterError as exc:
        if exc.status in (403, 404):
            return None
        raise


def refuse_immutable_changes(path: str, stored: Mapping[str, Any], doc: Mapping[str, Any]) -> None:
    """One line per immutable field the file changes, and the way out; nothing when none."""
    changed = [e for e in validate_update(stored, doc) if isinstance(e, ImmutableFieldError)]
    if not changed:
        return
    name = doc["metadata"]["name"]
    lines = [f"{path}: {e}" for e in changed]
    fields = ", ".join(e.path for e in changed)
    lines.append(
        f"{path}: DDPJob {name} already exists with another {fields}, which cannot change: "
        f"`ddpjob delete {name}`, then submit again, to run it with this file"
    )
    raise ClusterError("\n".join(lines))


def finished_note(name: str, stored: Mapping[str, Any] | None) -> str | None:
    """What to say when the job was already finished before this submit (None: it was not)."""
    status = (stored or {}).get("status") or {}
    phase = status.get("phase")
    if phase not in TERMINAL:
        return None
    when = status.get("completionTime")
    return (
        f"{name}: already {phase}{f' (at {when})' if when else ''}: submitting a finished job runs nothing "
        f"again; `ddpjob delete {name}`, then submit, to run it again"
    )


# The API server's words for server-side apply's conflicts (staging/.../fieldmanager: `conflict
# with "MANAGER"[ using VERSION]: .FIELD`).
_CONFLICT = re.compile(r'conflicts? with "([^"]+)"')


def explain_conflict(exc: ClusterError, name: str) -> ClusterError | None:
    """A 409 of server-side apply, said with the manager that owns the fields and the flag
    that takes them over; None for any other failure."""
    if exc.status != 409:
        return None
    message = exc.detail
    managers = sorted(set(_CONFLICT.findall(message)))
    if not managers:
        return None
    owner = ", ".join(managers) + (" (kubectl apply)" if any(m.startswith("kubectl") for m in managers) else "")
    return ClusterError(
        f"{name}: fields of this file are owned by another manager, {owner}: {message}; "
        "`ddpjob submit --force-conflicts` takes them over"
    )
