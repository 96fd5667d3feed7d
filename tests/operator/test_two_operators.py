"""Two operator replicas on the same jobs (a leader hand-over where both run for a
while): status writes carry the resourceVersion they were planned from, so neither
overwrites the other; the job's history never goes backwards."""

from __future__ import annotations

import pytest

from tests.operator import emulator_fixtures
from tests.operator.emulator_fixtures import JOBS, NS, Cluster, ddpjob
from tests.support.deadlines import TEST

# Still on the API emulator: its fixtures (tests/operator/emulator_fixtures.py), bound
# here by name, take the place of the conftest's real-server ones for this file.
cluster, crd, kubeconfig = emulator_fixtures.cluster, emulator_fixtures.crd, emulator_fixtures.kubeconfig
start_operator, operator = emulator_fixtures.start_operator, emulator_fixtures.operator

pytestmark = pytest.mark.timeout(TEST)


def status_history(cluster: Cluster, name: str) -> list[dict]:
    store = cluster.emulator.store
    with store.transaction():  # no write lands while the log is copied
        log = list(store.events.entries)
    return [
        dict(event["object"].get("status") or {})
        for _, res, event in log
        if f"{res.group}/{res.version}/{res.plural}" == JOBS and event["object"]["metadata"]["name"] == name
    ]


def test_two_operators_count_each_gang_failure_once(cluster: Cluster, start_operator) -> None:
    start_operator()
    start_operator()
    cluster.start_running(ddpjob("pair", nodes=3, maxRestarts=5))
    for attempt, rank in ((1, 2), (2, 0)):
        cluster.set_phase("pair", "Failed", ranks=[rank], exit_code=137)
        cluster.run_gang("pair", 3, attempt=attempt)
    cluster.set_phase("pair", "Succeeded")
    final = cluster.wait_phase("pair", "Succeeded", restarts=2)
    assert final["lastFailure"]["nodeRank"] == 0

    history = status_history(cluster, "pair")
    restarts = [s.get("restarts", 0) for s in history]
    assert restarts == sorted(restarts), restarts  # never overwritten by a stale plan
    phases = [s.get("phase") for s in history]
    assert "Succeeded" not in phases[: phases.index("Succeeded")] and set(phases[phases.index("Succeeded") :]) == {
        "Succeeded"
    }
    pods = cluster.pods("pair")
    assert sorted(p["metadata"]["name"] for p in pods) == ["pair-0", "pair-1", "pair-2"]
    assert {p["metadata"]["labels"]["ddpjob.io/restart-count"] for p in pods} == {"2"}
    assert cluster.ns == NS
