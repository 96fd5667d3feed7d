"""Two operator replicas on the same jobs (a leader hand-over where both run for a
while): status writes carry the resourceVersion they were planned from, so neither
overwrites the other; the job's history never goes backwards."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import kubernetes
import pytest

from ddpjob_devcluster.clusters.operator_runner import wait_for
from tests.operator.conftest import GROUP, PLURAL, VERSION, Cluster, ddpjob
from tests.support.deadlines import REACTION, TEST

pytestmark = pytest.mark.timeout(TEST)


class StatusHistory:
    """Every stored version of one job's status, in order: a watch sees each write (the
    API server sends one event per write, none merged), from the job's creation on."""

    def __init__(self, cluster: Cluster, name: str):
        self.cluster, self.name = cluster, name
        self.statuses: list[dict] = []
        self.versions: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="status-history", daemon=True)

    def _watch(self) -> None:
        version = "0"  # from the first write on (a watch from "0" starts with what is stored)
        while not self._stop.is_set():
            stream = kubernetes.watch.Watch().stream(
                self.cluster.custom.list_namespaced_custom_object,
                GROUP,
                VERSION,
                self.cluster.ns,
                PLURAL,
                field_selector=f"metadata.name={self.name}",
                resource_version=version,
                timeout_seconds=1,
            )
            for event in stream:
                job = event["object"]
                version = job["metadata"]["resourceVersion"]
                if event["type"] != "DELETED" and version not in self.versions:
                    self.versions.append(version)
                    self.statuses.append(dict(job.get("status") or {}))

    def __enter__(self) -> StatusHistory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def until(self, version: str) -> list[dict]:
        """The history up to the stored `version` (waited for)."""
        wait_for(lambda: version in self.versions, timeout=REACTION, message="the watch did not see the last write")
        return self.statuses[: self.versions.index(version) + 1]


@pytest.fixture
def history(cluster: Cluster) -> Iterator[StatusHistory]:
    with StatusHistory(cluster, "pair") as watched:
        yield watched


def test_two_operators_count_each_gang_failure_once(cluster: Cluster, start_operator, history) -> None:
    start_operator()
    start_operator()
    cluster.start_running(ddpjob("pair", nodes=3, maxRestarts=5))
    for attempt, rank in ((1, 2), (2, 0)):
        cluster.set_phase("pair", "Failed", ranks=[rank], exit_code=137)
        cluster.run_gang("pair", 3, attempt=attempt)
    cluster.set_phase("pair", "Succeeded")
    final = cluster.wait_phase("pair", "Succeeded", restarts=2)
    assert final["lastFailure"]["nodeRank"] == 0

    statuses = history.until(cluster.stored("pair")["metadata"]["resourceVersion"])
    restarts = [s.get("restarts", 0) for s in statuses]
    assert restarts == sorted(restarts), restarts  # never overwritten by a stale plan
    phases = [s.get("phase") for s in statuses]
    assert "Succeeded" not in phases[: phases.index("Succeeded")] and set(phases[phases.index("Succeeded") :]) == {
        "Succeeded"
    }
    pods = cluster.pods("pair")
    assert sorted(p["metadata"]["name"] for p in pods) == ["pair-0", "pair-1", "pair-2"]
    assert {p["metadata"]["labels"]["ddpjob.io/restart-count"] for p in pods} == {"2"}
