"""A DDPJob's Pods on a cluster, and the one a user means by a node or a global rank.

One Pod per node, labelled with its node rank (`names.LABEL_NODE_RANK`); global rank K
runs on node K // nprocPerNode. `ddpjob logs --rank/--node/--all` and the Python
client's `get_job_logs` pick their Pods here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ddpjob.api import names, spec
from ddpjob.cluster.connection import ClusterError, Connection, explained


def job_pods(conn: Connection, name: str) -> list[dict[str, Any]]:
    """The job's Pods, by node rank."""
    with explained(conn, f"ddpjob {name}"):
        response = conn.core.list_namespaced_pod(
            conn.namespace, label_selector=f"{names.LABEL_JOB_NAME}={name}", _preload_content=False
        )
        return sorted(json.loads(response.data)["items"], key=node_rank)


def node_rank(pod: Mapping[str, Any]) -> int:
    return int((pod["metadata"].get("labels") or {}).get(names.LABEL_NODE_RANK, 0))


def select(
    job: Mapping[str, Any],
    pods: list[dict[str, Any]],
    node: int | None = None,
    rank: int | None = None,
    every: bool = False,
) -> list[dict[str, Any]]:
    """The Pods asked for: every Pod, the Pod of global `rank`, or of `node` (default 0).
    A rank outside the job's world, or a node with no Pod, is a ClusterError."""
    if every:
        return pods
    node = node or 0
    if rank is not None:
        try:
            nproc = spec.parse_job(dict(job)).nproc_per_node
        except spec.InvalidSpec as exc:
            raise ClusterError(f"cannot map --rank to a Pod: the job's spec is invalid: {exc}") from None
        world = nproc * int((job.get("spec") or {}).get("nodes", 1))
        if not 0 <= rank < world:
            raise ClusterError(f"--rank: must be in 0..{world - 1} for this job (got {rank})")
        node = rank // nproc
    chosen = [p for p in pods if ((p["metadata"].get("labels") or {}).get(names.LABEL_NODE_RANK)) == str(node)]
    if not chosen:
        raise ClusterError(
            f"not found: no Pod of node {node} for ddpjob {job['metadata']['name']} "
            f"(phase {(job.get('status') or {}).get('phase') or 'Pending'})"
        )
    return chosen
