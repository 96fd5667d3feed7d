"""The operator against a struggling API server (the fault proxy in front of the real
kube-apiserver, with devcluster chaos.py: a share of the operator's requests fail with
500/503/429, its watch streams end every few seconds): it never exits, creates no
duplicate or orphan object, and every job still reaches Succeeded. The test's own
requests (the jobs, the kubelet's part) go to the server directly, untouched."""

from __future__ import annotations

import types
from collections import Counter
from typing import Any

import pytest

from ddpjob.operator import handlers, settings
from ddpjob_devcluster.clusters.client import json_object
from ddpjob_devcluster.clusters.operator_runner import wait_for
from ddpjob_devcluster.scenarios.chaos import Chaos
from tests.operator.conftest import Cluster, ddpjob
from tests.support.deadlines import PHASE, REACTION, TEST

pytestmark = pytest.mark.timeout(TEST)
CALM = Chaos(rate=0.0, watch_lifetime=None)  # the proxy passes every request through


def test_jobs_succeed_through_a_struggling_api_server(cluster: Cluster, operator: Any) -> None:
    chaos = cluster.proxy.chaos = Chaos(rate=0.5, watch_lifetime=2.0, seed=7)
    names = [f"storm-{i}" for i in range(3)]
    for name in names:
        cluster.create(ddpjob(name, nodes=2))
    for name in names:
        cluster.wait_pods(name, 2, timeout=PHASE)
        cluster.set_phase(name, "Running")
    for name in names:
        cluster.wait_phase(name, "Running", timeout=PHASE)
        cluster.set_phase(name, "Succeeded")
    for name in names:
        cluster.wait_phase(name, "Succeeded", timeout=PHASE)
    assert chaos.failed > 20, "the chaos did not bite"
    assert operator.alive

    cluster.proxy.chaos = CALM
    for name in names:
        pods = cluster.pods(name)
        assert sorted(p["metadata"]["name"] for p in pods) == [f"{name}-0", f"{name}-1"]
        assert {p["metadata"]["labels"]["ddpjob.io/restart-count"] for p in pods} == {"0"}
        job = cluster.job(name)
    assert job is not None and job["status"]["restarts"] == 0
    jobs = json_object(cluster.custom.list_namespaced_custom_object("ddpjob.io", "v1alpha1", cluster.ns, "ddpjobs"))
    uids = {j["metadata"]["uid"] for j in jobs["items"]}
    services = cluster.api.sanitize_for_serialization(cluster.core.list_namespaced_service(cluster.ns))["items"]
    children = cluster.pods() + services
    assert all(any(ref["uid"] in uids for ref in c["metadata"].get("ownerReferences") or []) for c in children)
    assert Counter(s["metadata"]["name"] for s in services) == Counter(names)


def test_a_total_outage_does_not_stop_the_operator(cluster: Cluster, operator: Any) -> None:
    outage = cluster.proxy.chaos = Chaos(rate=1.0, watch_lifetime=1.0)
    cluster.create(ddpjob("after", nodes=1))
    # kopf's discovery and watches, and the operator's calls, back off and keep asking.
    wait_for(lambda: outage.failed > 10, timeout=REACTION, message="the operator stopped asking")
    assert operator.alive
    cluster.proxy.chaos = CALM  # the server recovers: the job created during the outage is served
    wait_for(lambda: len(cluster.pods("after")) == 1, timeout=REACTION, message="no Pod after the recovery")


def test_liveness_fails_only_after_a_long_outage() -> None:
    kube = types.SimpleNamespace(outage=0.0)
    kube.outage_seconds = lambda: kube.outage
    memo = types.SimpleNamespace(
        kube=kube, controller=None, settings=settings.from_env({settings.LIVENESS_OUTAGE_ENV: "120"})
    )
    kube.outage = 100.0
    assert handlers.probe(memo=memo) == 0
    kube.outage = 121.0
    with pytest.raises(RuntimeError, match="has not answered for 121s"):
        handlers.probe(memo=memo)
