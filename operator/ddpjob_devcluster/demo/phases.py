"""What the demo prints while jobs run: one line per DDPJob phase change."""

from __future__ import annotations

from typing import Any

from ddpjob.api import names
from ddpjob_devcluster.clusters.client import json_object
from ddpjob_devcluster.demo.backends import DemoCluster

COLUMNS = (
    "NAME:.metadata.name,PHASE:.status.phase,READY:.status.readyNodes,RESTARTS:.status.restarts,MESSAGE:.status.message"
)


def say(message: str) -> None:
    print(f"[demo-cluster] {message}", flush=True)


class PhaseReporter:
    """One line per DDPJob phase change, so the terminal shows what happens."""

    def __init__(self, cluster: DemoCluster):
        self.cluster = cluster
        self.seen: dict[tuple[str | None, str], tuple[Any, Any]] = {}  # (namespace, name) -> (phase, restarts)

    def poll(self) -> None:
        listing = json_object(self.cluster.custom.list_cluster_custom_object(names.GROUP, names.VERSION, names.PLURAL))
        for job in listing["items"]:
            meta, status = job["metadata"], job.get("status") or {}
            key = (meta.get("namespace"), meta["name"])
            state = (status.get("phase"), status.get("restarts"))
            if status.get("phase") and self.seen.get(key) != state:
                self.seen[key] = state
                failure = status.get("lastFailure") or {}
                # A restart says why (the failed Pod, its reason and message), as describe does.
                why = (
                    f" [last failure: {failure.get('pod')} {failure.get('reason')}: "
                    f"{str(failure.get('message', ''))[:300]}]"
                    if state[0] == "Restarting" and failure
                    else ""
                )
                say(
                    f"ddpjob {key[0]}/{key[1]}: {status['phase']} (restarts {status.get('restarts', 0)}): "
                    f"{status.get('message', '')}{why}"
                )
