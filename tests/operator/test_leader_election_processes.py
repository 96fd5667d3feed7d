"""Replicas of the operator as processes (`run_operator`, as `ddpjob operator` runs it) on
the real kube-apiserver, through the fault proxy, electing their leader on a Lease with
short timings: the standby answers
the liveness endpoint with who leads and takes over from a killed leader, which the job's
status then shows; a leader stopped with SIGTERM releases the Lease; one that cannot renew
exits with status 1. The standby's /metrics answers, all zero.
tests/system/test_leader_election_real.py does it with the chart's defaults and RBAC."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import sys
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes
import pytest

from ddpjob.local.ports import free_port
from ddpjob.operator import settings
from ddpjob_devcluster.clusters.client import OperatorProcess
from ddpjob_devcluster.clusters.operator_runner import wait_for
from tests.operator.conftest import ROOT, Cluster, ddpjob
from tests.operator.test_operator_operations import metric
from tests.support.deadlines import REACTION, TEST

pytestmark = pytest.mark.timeout(TEST)

LEASE = "ddpjob-operator"
FAST = {settings.LEASE_SECONDS_ENV: "2", settings.RENEW_DEADLINE_ENV: "1.5", settings.RETRY_PERIOD_ENV: "0.3"}


@pytest.fixture
def replica(
    cluster: Cluster, operator_kubeconfig: pathlib.Path, tmp_path: pathlib.Path
) -> Iterator[Callable[..., Any]]:
    """Start a replica (through the fault proxy, on the test's namespace): its Pod name,
    its liveness port, timings; all stopped at the end."""
    kubeconfig, ns = operator_kubeconfig, cluster.ns
    started: list[OperatorProcess] = []

    def start(pod: str, port: int, metrics: int | None = None, **timings: str) -> OperatorProcess:
        liveness = f"http://127.0.0.1:{port}/healthz"
        env = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig),
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
            "POD_ID": pod,
            settings.LEASE_ENV: LEASE,
            settings.LEASE_NAMESPACE_ENV: ns,
            **(timings or FAST),
        }
        if metrics is not None:
            env[settings.METRICS_PORT_ENV] = str(metrics)
        command = [
            sys.executable,
            "-c",
            f"from ddpjob.operator.main import run_operator; run_operator({ns!r}, False, {liveness!r}, None)",
        ]
        process = OperatorProcess(kubeconfig, tmp_path / f"{pod}.log", command=command, env=env).start()
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop(signal.SIGKILL)
        print(f"--- {process.log_path.name} ---\n{process.log_tail()}")


def holder(cluster: Cluster) -> str:
    lease = kubernetes.client.CoordinationV1Api(cluster.api).read_namespaced_lease(LEASE, cluster.ns)
    return (lease.spec and lease.spec.holder_identity) or ""


def probe(port: int) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, None


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
        return response.read().decode()


def test_the_standby_answers_its_probe_and_takes_over_a_killed_leaders_job(cluster: Cluster, replica) -> None:
    a_port, b_port, b_metrics = free_port(), free_port(), free_port()
    a = replica("replica-a", a_port)
    leader = wait_for(
        lambda: holder(cluster).startswith("replica-a_") and holder(cluster),
        timeout=REACTION,
        message="replica-a never led",
        describe=a.log_tail,
    )
    b = replica("replica-b", b_port, metrics=b_metrics)
    # The standby's own probe, until kopf runs: healthy, naming the leader.
    standby = wait_for(
        lambda: (answer := probe(b_port))[1]["standby"]["leader"] and answer,
        timeout=REACTION,
        message="the standby does not answer its probe with the leader",
        describe=b.log_tail,
    )
    assert standby == (200, {"standby": {"lease": f"Lease {cluster.ns}/{LEASE}", "leader": leader}})
    assert "standby" not in probe(a_port)[1]  # kopf's own, on the leader
    # Its /metrics answers too, all zero: a scrape of every replica sums to the leader's.
    assert metric(scrape(b_metrics), "ddpjob_pods_created_total") == 0

    cluster.start_running(ddpjob("ha", nodes=2))  # replica-a created the Pods and wrote Running
    uids = {p["metadata"]["uid"] for p in cluster.pods("ha")}
    a.stop(signal.SIGKILL)
    wait_for(
        lambda: holder(cluster).startswith("replica-b_"),
        timeout=REACTION,
        message="replica-b never took over",
        describe=b.log_tail,
    )

    cluster.set_phase("ha", "Succeeded")
    status = cluster.wait_phase("ha", "Succeeded")  # written by replica-b, the only one alive
    # Its /metrics is the controller's now, counting the job it finished.
    wait_for(
        lambda: 'ddpjob_jobs{phase="Succeeded"} 1.0' in scrape(b_metrics),
        timeout=REACTION,
        message="the new leader's /metrics does not count the job",
    )
    assert status["restarts"] == 0 and {p["metadata"]["uid"] for p in cluster.pods("ha")} == uids
    # The probe endpoint is kopf's now.
    assert wait_for(
        lambda: (answer := probe(b_port))[0] == 200 and "standby" not in answer[1],
        timeout=REACTION,
        message="the new leader's probe is not kopf's",
    )
    assert b.alive


def test_a_leader_stopped_with_sigterm_releases_the_lease_to_the_standby(cluster: Cluster, replica) -> None:
    # A lease of 300 s: the standby leading within REACTION took a released Lease, not an expired one.
    timings = {**FAST, settings.LEASE_SECONDS_ENV: "300"}
    a = replica("replica-a", free_port(), **timings)
    wait_for(
        lambda: holder(cluster).startswith("replica-a_"),
        timeout=REACTION,
        message="replica-a never led",
        describe=a.log_tail,
    )
    b_port = free_port()
    b = replica("replica-b", b_port, **timings)
    wait_for(lambda: probe(b_port)[0] == 200, timeout=REACTION, message="no standby", describe=b.log_tail)

    assert a.stop(signal.SIGTERM) == 0
    assert "released by replica-a_" in a.log_tail(20)
    # kopf was stopped through its stop flag: stopped by the signal itself, it waits 5 s on
    # its own waiter of that flag before the Lease can be released.
    assert "Stop-flag is set" in a.log_tail(20) and "Signal SIGTERM is received" not in a.log_tail(20)
    wait_for(
        lambda: holder(cluster).startswith("replica-b_"),
        timeout=REACTION,
        message="replica-b did not take the released Lease",
        describe=b.log_tail,
    )
    lease = kubernetes.client.CoordinationV1Api(cluster.api).read_namespaced_lease(LEASE, cluster.ns)
    assert lease.spec is not None and lease.spec.lease_transitions == 1


def test_a_leader_that_cannot_renew_exits_with_status_1(cluster: Cluster, replica) -> None:
    a = replica("replica-a", free_port())
    wait_for(
        lambda: holder(cluster).startswith("replica-a_"),
        timeout=REACTION,
        message="replica-a never led",
        describe=a.log_tail,
    )
    cluster.inject_fault(verb="update", resource="leases", status=503, count=10**6)
    wait_for(lambda: not a.alive, timeout=REACTION, message="the leader went on without its Lease", describe=a.log_tail)
    assert a.returncode == 1
    assert "not renewed within the renew deadline (1.5s); exiting" in a.log_tail(20)
