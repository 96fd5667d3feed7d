"""The operator under stress: restarts mid-reconcile, API errors on writes, write budget.
The faults are the fault proxy's, between the operator and the real kube-apiserver."""

from __future__ import annotations

from collections import Counter

import pytest

from ddpjob_devcluster.clusters.operator_runner import wait_for
from tests.operator.conftest import Cluster, ddpjob, fast_settings
from tests.support.deadlines import REACTION, TEST

pytestmark = pytest.mark.timeout(TEST)


def pod_creates(cluster: Cluster) -> int:
    return sum(1 for r in cluster.requests if r.verb == "create" and r.resource == "pods")


def assert_one_gang(cluster: Cluster, job: str, nodes: int, restart_count: int = 0) -> None:
    pods = cluster.pods(job)
    ranks = Counter(p["metadata"]["labels"]["ddpjob.io/node-rank"] for p in pods)
    assert ranks == Counter(str(r) for r in range(nodes)), [p["metadata"]["name"] for p in pods]
    assert {p["metadata"]["labels"]["ddpjob.io/restart-count"] for p in pods} == {str(restart_count)}


def test_operator_stopped_mid_reconcile_creates_no_duplicates_and_loses_no_job(
    cluster: Cluster, start_operator
) -> None:
    # Two of the four Pod creates hang for a while: the operator is stopped with them in flight.
    cluster.inject_fault(verb="create", resource="pods", status=None, count=2, delay=1.5)
    first = start_operator()
    cluster.create(ddpjob("resume", nodes=4))
    wait_for(lambda: len(cluster.pods("resume")) >= 2, message="the first Pods were not created")
    first.stop()
    partial = len(cluster.pods("resume"))

    # A job created while no operator runs is not lost either.
    cluster.create(ddpjob("while-down", nodes=2))
    start_operator()
    cluster.wait_pods("resume", 4)
    cluster.wait_pods("while-down", 2)
    assert_one_gang(cluster, "resume", 4)
    assert_one_gang(cluster, "while-down", 2)
    # Nothing was deleted and recreated; every Pod was created once (a retried create
    # of a Pod that made it after all answers 409 and is not counted as created).
    assert not [r for r in cluster.requests if r.verb == "delete" and r.resource == "pods"]
    assert partial >= 2
    cluster.run_to_success("resume", 4)
    cluster.run_to_success("while-down", 2)
    assert cluster.status("resume")["restarts"] == 0


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(dict(verb="create", resource="pods", status=500, count=6), id="pod-create-500"),
        pytest.param(dict(verb="create", resource="pods", status=409, count=3), id="pod-create-409-not-there"),
        pytest.param(dict(verb="create", resource="services", status=503, count=5), id="service-create-503"),
        pytest.param(
            dict(verb="patch", resource="ddpjobs", subresource="status", status=500, count=6), id="status-patch-500"
        ),
        pytest.param(dict(verb="create", resource="pods", status=None, count=2, delay=1.2), id="pod-create-timeout"),
    ],
)
def test_api_errors_on_writes_are_retried_without_duplicates(cluster: Cluster, start_operator, fault) -> None:
    def settings(s):
        fast_settings(s)
        s.networking.request_timeout = 0.5  # the delayed creates time out, then land

    start_operator(configure=settings)
    cluster.inject_fault(**fault)
    cluster.create(ddpjob("faulty", nodes=3))
    cluster.wait_pods("faulty", 3, timeout=REACTION)
    assert_one_gang(cluster, "faulty", 3)
    cluster.run_to_success("faulty", 3)
    assert_one_gang(cluster, "faulty", 3)
    assert cluster.status("faulty")["restarts"] == 0
    assert not [r for r in cluster.requests if r.verb == "delete" and r.resource == "pods"]


def test_failed_status_write_deletes_nothing_then_restarts_once(cluster: Cluster, operator) -> None:
    cluster.start_running(ddpjob("order", nodes=2, restartPolicy="OnFailure"))
    # The restart's status write fails (more times than kopf retries): no Pod may be
    # deleted before the bumped restart count is stored.
    cluster.inject_fault(verb="patch", resource="ddpjobs", subresource="status", status=500, count=5)
    before = len(cluster.requests)
    cluster.set_phase("order", "Failed", ranks=[0], exit_code=1)
    cluster.wait_pods("order", 2, restart_count=1, timeout=REACTION)
    log = cluster.requests[before:]
    status_ok = [i for i, r in enumerate(log) if r.subresource == "status" and r.resource == "ddpjobs"]
    deletes = [i for i, r in enumerate(log) if r.verb == "delete" and r.resource == "pods"]
    assert deletes and len(status_ok) > 5
    # The first delete comes after the sixth status write (five failed, one succeeded).
    assert deletes[0] > status_ok[5]
    assert cluster.status("order")["restarts"] == 1


def test_a_member_gone_while_no_operator_ran_restarts_the_gang_uncharged(cluster: Cluster, start_operator) -> None:
    # A drain evicts a gang's Pod and the operator's leader at once: the Pod is gone before
    # the standby takes over, which never saw it, nor why it went. maxRestarts=0, so a
    # loss charged as a deletion by hand would fail the job.
    first = start_operator()
    cluster.start_running(ddpjob("failover", nodes=2, restartPolicy="OnFailure", maxRestarts=0))
    first.stop()
    cluster.core.delete_namespaced_pod("failover-1", cluster.ns, grace_period_seconds=0)
    wait_for(lambda: len(cluster.pods("failover")) == 1, message="failover-1 was not deleted")
    start_operator()
    cluster.run_gang("failover", 2, attempt=1)
    st = cluster.status("failover")
    assert st["lastFailure"]["reason"] == "PodGone" and st["lastFailure"]["pod"] == "failover-1"
    assert st["restarts"] == 1 and st["disruptions"] == 1
    # While an operator watches, the same delete is someone's (charged): the operator saw the Pod.
    cluster.core.delete_namespaced_pod("failover-1", cluster.ns, grace_period_seconds=0)
    st = cluster.wait_phase("failover", "Failed")
    assert st["lastFailure"]["reason"] == "PodDeleted" and "maxRestarts=0 reached" in st["message"]


def test_api_writes_per_job_stay_within_budget(cluster: Cluster, operator) -> None:
    nodes = 4
    cluster.create(ddpjob("budget", nodes=nodes))
    cluster.run_to_success("budget", nodes)
    cluster.wait_event("budget", "Succeeded")
    writes = cluster.writes_for("budget")
    counts = Counter((r.resource, r.subresource, r.verb) for r in writes)
    # Service 1 + Pods N + kopf's one annotation patch + status writes + Events.
    assert counts[("pods", None, "create")] == nodes
    assert counts[("services", None, "create")] == 1
    assert len(writes) <= nodes + 10, counts


def test_clusterwide_serves_every_namespace(cluster: Cluster, start_operator) -> None:
    start_operator(namespace=None)
    team = cluster.in_namespace(cluster.make_namespace("team-a"))  # made after the operator started
    team.create(ddpjob("wide", nodes=2))
    team.run_to_success("wide", 2)
    assert team.service("wide") is not None
    assert all(p["metadata"]["namespace"] == team.ns for p in team.pods("wide"))
    # The test's own namespace is served by the same operator.
    cluster.create(ddpjob("home", nodes=1))
    cluster.run_to_success("home", 1)
