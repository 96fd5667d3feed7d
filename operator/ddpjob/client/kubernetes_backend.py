"""The Python client's jobs on a cluster, through the cluster layer the `ddpjob` command
stands on (ddpjob/cluster/): each failure a `ClusterError` with the command's one line."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from ddpjob.client.backend_configs import KubernetesBackendConfig
from ddpjob.client.events import Event
from ddpjob.client.job_status import Job
from ddpjob.cluster import connection, events, jobs, logs, pods
from ddpjob.cluster.connection import ClusterError

# A label key (an optional DNS prefix and a name) and a value, as Kubernetes takes them:
# a filter is sent as a label selector, so nothing else may reach its syntax.
LABEL_KEY = re.compile(r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


def label_selector(labels: Mapping[str, str]) -> str:
    """`k=v,k2=v2` from a dict; a key or value Kubernetes would refuse is a ValueError."""
    for key, value in labels.items():
        if not isinstance(key, str) or not LABEL_KEY.fullmatch(key):
            raise ValueError(f"labels: {key!r} is not a label key")
        if not isinstance(value, str) or not LABEL_VALUE.fullmatch(value):
            raise ValueError(f"labels[{key!r}]: {value!r} is not a label value")
    return ",".join(f"{k}={v}" for k, v in labels.items())


class KubernetesBackend:
    def __init__(self, config: KubernetesBackendConfig):
        self.conn = connection.connect(config.config_file, config.context, config.namespace)

    @property
    def namespace(self) -> str:
        return self.conn.namespace

    def create(self, body: Mapping[str, Any]) -> None:
        name = body["metadata"]["name"]
        try:
            jobs.create_job(self.conn, body)
        except ClusterError as exc:
            if exc.status == 409:  # AlreadyExists: say the way out
                raise ClusterError(
                    f"ddpjob {name} already exists in namespace {self.namespace}: "
                    f"delete_job({name!r}) first, or give another name",
                    status=exc.status,
                ) from exc
            raise

    def get(self, name: str) -> Job:
        return Job.from_object(jobs.get_job(self.conn, name))

    def find(self, labels: Mapping[str, str] | None) -> list[Job]:
        listing = jobs.list_jobs(self.conn, label_selector(labels) if labels else None)
        return [Job.from_object(o) for o in listing.get("items") or []]

    def events(self, name: str) -> list[Event]:
        return [Event.from_object(e) for e in events.job_events(self.conn, name)]

    def log_lines(
        self, name: str, node: int | None, rank: int | None, every: bool, follow: bool, tail: int | None
    ) -> Iterator[tuple[str, str]]:
        """`(pod, line)` of the Pods asked for. The job and its Pods are looked up now (a
        ClusterError at the call, not at the first line); one Pod of a node, where a
        restart leaves two for a moment, the first."""
        job = jobs.get_job(self.conn, name)
        chosen = pods.select(job, pods.job_pods(self.conn, name), node=node, rank=rank, every=every)
        return logs.merged(self.conn, [p["metadata"]["name"] for p in chosen[: None if every else 1]], follow, tail)

    def delete(self, name: str) -> None:
        jobs.delete_job(self.conn, name)

    def suspend(self, name: str, suspend: bool) -> None:
        jobs.set_suspended(self.conn, name, suspend)
