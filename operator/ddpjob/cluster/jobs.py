"""DDPJobs on a cluster: read, list, create, apply, suspend, resume, delete.

The objects are the API server's own (dicts, as it returned them); the phase is read
as `ddpjob get` shows it (`Pending` until the operator wrote a status). Each call
raises a `ClusterError` naming the job (connection.py), never the client's exception.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ddpjob.api import names
from ddpjob.cluster.connection import Connection, explained

# The field manager of every write (server-side apply's owner of the fields it sets).
FIELD_MANAGER = "ddpjob"
TERMINAL = ("Succeeded", "Failed")
TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def phase_of(job: Mapping[str, Any]) -> str:
    return (job.get("status") or {}).get("phase") or "Pending"


def get_job(conn: Connection, name: str) -> dict[str, Any]:
    with explained(conn, f"ddpjob {name}"):
        job: dict[str, Any] = conn.custom.get_namespaced_custom_object(
            names.GROUP, names.VERSION, conn.namespace, names.PLURAL, name
        )
    return job


def list_jobs(conn: Connection, label_selector: str | None = None) -> dict[str, Any]:
    """The namespace's DDPJobs as the API server lists them (a `DDPJobList`)."""
    options = {"label_selector": label_selector} if label_selector else {}
    with explained(conn):
        listing: dict[str, Any] = conn.custom.list_namespaced_custom_object(
            names.GROUP, names.VERSION, conn.namespace, names.PLURAL, **options
        )
    return listing


def job_table(conn: Connection, name: str | None = None) -> dict[str, Any]:
    """The API server's Table of one job or of the namespace's (the CRD's printer columns)."""
    call = conn.custom.get_namespaced_custom_object if name else conn.custom.list_namespaced_custom_object
    extra = (name,) if name else ()
    with explained(conn, f"ddpjob {name or ''}".strip()):
        response = call(
            names.GROUP,
            names.VERSION,
            conn.namespace,
            names.PLURAL,
            *extra,
            _headers={"Accept": TABLE_ACCEPT},
            _preload_content=False,
        )
        table: dict[str, Any] = json.loads(response.data)
    return table


def create_job(conn: Connection, body: Mapping[str, Any]) -> None:
    """Create the job; one already there is a ClusterError of status 409 (AlreadyExists)."""
    with explained(conn, f"ddpjob {body['metadata']['name']}"):
        conn.custom.create_namespaced_custom_object(
            names.GROUP, names.VERSION, conn.namespace, names.PLURAL, dict(body), field_manager=FIELD_MANAGER
        )


def apply_job(conn: Connection, body: Mapping[str, Any], force: bool = False) -> None:
    """Server-side apply of the job (`ddpjob submit`): created, or its fields updated;
    fields another manager owns are a ClusterError of status 409 unless `force`."""
    name = body["metadata"]["name"]
    patch(conn, name, dict(body), "application/apply-patch+yaml", field_manager=FIELD_MANAGER, force=force or None)


def set_suspended(conn: Connection, name: str, suspend: bool) -> None:
    """`spec.suspend`: true deletes the job's Pods and keeps the job; false starts them again."""
    patch(conn, name, {"spec": {"suspend": suspend}}, "application/merge-patch+json")


def patch(conn: Connection, name: str, body: dict[str, Any], content_type: str, **options: Any) -> None:
    with explained(conn, f"ddpjob {name}"):
        conn.custom.patch_namespaced_custom_object(
            names.GROUP,
            names.VERSION,
            conn.namespace,
            names.PLURAL,
            name,
            body,
            _content_type=content_type,
            **options,
        )


def delete_job(conn: Connection, name: str) -> None:
    """Delete the job; its Pods and Service go with it (in the background)."""
    with explained(conn, f"ddpjob {name}"):
        conn.custom.delete_namespaced_custom_object(
            names.GROUP, names.VERSION, conn.namespace, names.PLURAL, name, propagation_policy="Background"
        )
