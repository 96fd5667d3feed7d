"""A DDPJob's Events on a cluster (Created, Running, Restarting, NodeLost, Failed, ...):
the ones whose involved object has the job's name, as `kubectl describe` asks for them."""

from __future__ import annotations

import json
from typing import Any

from ddpjob.cluster.connection import Connection, explained


def job_events(conn: Connection, name: str) -> list[dict[str, Any]]:
    """The Events of objects named `name` in the namespace, as the API server lists them."""
    with explained(conn, f"ddpjob {name}"):
        response = conn.core.list_namespaced_event(
            conn.namespace, field_selector=f"involvedObject.name={name}", _preload_content=False
        )
        events: list[dict[str, Any]] = json.loads(response.data).get("items") or []
    return events
