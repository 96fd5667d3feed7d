"""The operator against a struggling API server (devcluster chaos.py: a share of all
requests fail with 500/503/429, watch streams end every few seconds): it never exits,
creates no duplicate or orphan object, and every job still reaches Succeeded."""

from __future__ import annotations

import asyncio
import functools
import types
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from kmock import resource

from ddpjob.operator import handlers, settings
from ddpjob_devcluster.apiserver.emulator import KubeEmulator
from ddpjob_devcluster.clusters.operator_runner import wait_for
from ddpjob_devcluster.scenarios.chaos import Chaos
from tests.operator import emulator_fixtures
from tests.operator.emulator_fixtures import NS, ddpjob
from tests.support.deadlines import PHASE, REACTION, TEST

# Still on the API emulator: its fixtures (tests/operator/emulator_fixtures.py), bound
# here by name, take the place of the conftest's real-server ones for this file.
cluster, crd, kubeconfig = emulator_fixtures.cluster, emulator_fixtures.crd, emulator_fixtures.kubeconfig
start_operator, operator = emulator_fixtures.start_operator, emulator_fixtures.operator

pytestmark = pytest.mark.timeout(TEST)
JOBS, PODS = resource("ddpjob.io/v1alpha1/ddpjobs"), resource("v1/pods")


def in_emulator(emu: KubeEmulator, fn: Callable[[], Any]) -> Any:
    """Act on the store from its own loop, as a client the chaos does not touch."""

    async def call():
        return fn()

    assert emu._loop is not None, "the emulator is not started"
    return asyncio.run_coroutine_threadsafe(call(), emu._loop).result(timeout=30)


def kubelet(emu: KubeEmulator, job: str, phase: str) -> None:
    state = {
        "Running": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
        "Succeeded": {"terminated": {"exitCode": 0, "reason": "Completed"}},
    }[phase]
    patch = {"status": {"phase": phase, "containerStatuses": [{"name": "trainer", "state": state}]}}

    def apply():
        for pod in emu.store.peek_all(PODS, NS):
            if pod["metadata"]["labels"].get("ddpjob.io/job-name") == job:
                emu.store.patch(PODS, NS, pod["metadata"]["name"], "status", "application/merge-patch+json", patch)

    in_emulator(emu, apply)


def pods_of(emu: KubeEmulator, job: str) -> list[dict]:
    return [p for p in emu.list_objects("v1/pods", NS) if p["metadata"]["labels"].get("ddpjob.io/job-name") == job]


def phase(emu: KubeEmulator, job: str) -> str | None:
    return ((emu.get_object("ddpjob.io/v1alpha1/ddpjobs", NS, job) or {}).get("status") or {}).get("phase")


def test_jobs_succeed_through_a_struggling_api_server(emulator: KubeEmulator, crd: dict, operator: Any) -> None:
    chaos = emulator.chaos = Chaos(rate=0.5, watch_lifetime=2.0, seed=7)
    names = [f"storm-{i}" for i in range(3)]
    for name in names:
        in_emulator(emulator, functools.partial(emulator.store.create, JOBS, NS, ddpjob(name, nodes=2)))
    for name in names:
        wait_for(
            lambda: len(pods_of(emulator, name)) == 2,  # noqa: B023 - the wait calls it before the loop moves on
            timeout=PHASE,
            message=f"{name}: Pods not created",
        )
        kubelet(emulator, name, "Running")
    for name in names:
        wait_for(lambda: phase(emulator, name) == "Running", timeout=PHASE, message=f"{name}: not Running")  # noqa: B023 - the wait calls it before the loop moves on
        kubelet(emulator, name, "Succeeded")
    for name in names:
        wait_for(
            lambda: phase(emulator, name) == "Succeeded",  # noqa: B023 - the wait calls it before the loop moves on
            timeout=PHASE,
            message=f"{name}: not Succeeded",
        )
    assert chaos.failed > 20, "the chaos did not bite"
    assert operator.alive

    emulator.chaos = None
    for name in names:
        pods = pods_of(emulator, name)
        assert sorted(p["metadata"]["name"] for p in pods) == [f"{name}-0", f"{name}-1"]
        assert {p["metadata"]["labels"]["ddpjob.io/restart-count"] for p in pods} == {"0"}
        job = emulator.get_object("ddpjob.io/v1alpha1/ddpjobs", NS, name)
    assert job is not None and job["status"]["restarts"] == 0
    uids = {j["metadata"]["uid"] for j in emulator.list_objects("ddpjob.io/v1alpha1/ddpjobs", NS)}
    children = emulator.list_objects("v1/pods", NS) + emulator.list_objects("v1/services", NS)
    assert all(any(ref["uid"] in uids for ref in c["metadata"].get("ownerReferences") or []) for c in children)
    assert Counter(s["metadata"]["name"] for s in emulator.list_objects("v1/services", NS)) == Counter(names)


def test_a_total_outage_does_not_stop_the_operator(emulator: KubeEmulator, crd: dict, operator: Any) -> None:
    emulator.chaos = Chaos(rate=1.0, watch_lifetime=1.0)
    in_emulator(emulator, lambda: emulator.store.create(JOBS, NS, ddpjob("after", nodes=1)))
    # kopf's discovery and watches, and the operator's calls, back off and keep asking.
    wait_for(lambda: emulator.chaos.failed > 10, timeout=REACTION, message="the operator stopped asking")
    assert operator.alive
    emulator.chaos = None  # the server recovers: the job created during the outage is served
    wait_for(lambda: len(pods_of(emulator, "after")) == 1, timeout=REACTION, message="no Pod after the recovery")


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
