"""What `DDPJobClient` asks of where its jobs run: a cluster (kubernetes_backend.py) or
this machine (local_backend.py). Each failure is a `ClusterError` with one line; the
client turns arguments into these calls and these answers into its own."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from ddpjob.client.events import Event
from ddpjob.client.job_status import Job


class Backend(Protocol):
    @property
    def namespace(self) -> str: ...

    def create(self, body: Mapping[str, Any]) -> None:
        """Create the checked job; one of its name already there is a ClusterError."""

    def get(self, name: str) -> Job: ...

    def find(self, labels: Mapping[str, str] | None) -> list[Job]:
        """Every job, or those with all of these labels."""

    def events(self, name: str) -> list[Event]: ...

    def log_lines(
        self, name: str, node: int | None, rank: int | None, every: bool, follow: bool, tail: int | None
    ) -> Iterator[tuple[str, str]]:
        """`(pod, line)` of the Pods asked for (node 0's by default)."""

    def delete(self, name: str) -> None: ...

    def suspend(self, name: str, suspend: bool) -> None: ...
