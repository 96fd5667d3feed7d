"""A waiting Volcano gang says what Volcano says of its PodGroup: the queue's verdict that
only an Event on the PodGroup carries (seen on the real Volcano v1.10.0), first in the
job's message; read again with backoff while the gang waits, dropped once it is admitted."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from ddpjob.api.gangs import kueue, volcano
from ddpjob.api.spec import parse_job
from ddpjob.job.observe import PodState
from ddpjob.operator import gang_reader
from ddpjob.operator.kube import Forbidden, Kube, NotFound
from tests.operator.test_controller import FakeKube, job_body, make, pod, run

pytestmark = pytest.mark.timeout(30)

HELD = "pod group is not ready, 2 Pending, 2 minAvailable; Pending: 2 Unschedulable"  # Volcano's words on the Pods


def event(message: str, at: str, type_: str = "Normal") -> dict[str, Any]:
    return {"type": type_, "reason": "Unschedulable", "message": message, "lastTimestamp": at}


class VolcanoKube(FakeKube):
    """Serves the attempt's PodGroup and the Events on it (or refuses them)."""

    def __init__(self, phase: str = "Pending", events: list | None = None, refuse: type | None = None) -> None:
        super().__init__()
        self.phase, self.events, self.refuse = phase, events or [], refuse
        self.urls: list[str] = []

    async def get(self, url: str) -> dict[str, Any]:
        self.urls.append(url)
        if "/events?" in url:
            if self.refuse is not None:
                raise self.refuse(403, "Forbidden", "events is forbidden")
            # The API server applies the field selector's type=Normal.
            return {"items": [e for e in self.events if "type%3DNormal" not in url or e["type"] == "Normal"]}
        return {
            "metadata": {"name": url.rsplit("/", 1)[1], "uid": "pg-1"},
            "spec": {"queue": "research"},
            "status": {"phase": self.phase},
        }


def waiting_job(kube: VolcanoKube):
    pods = [
        pod(r, "Pending", scheduled=False, scheduling_reason="Unschedulable", scheduling_message=HELD) for r in range(2)
    ]
    c, _, _events, index = make(job_body(nodes=2, scheduling={"gang": "volcano", "queue": "research"}), pods)
    c.kube = kube
    return c, index


def last_message(kube: FakeKube) -> str:
    return [p for kind, p in kube.calls if kind == "status"][-1]["message"]


def test_the_queues_verdict_comes_first_in_the_message() -> None:
    kube = VolcanoKube(
        events=[
            event("resource in cluster is overused", "2026-01-01T00:00:01Z"),
            event("queue resource quota insufficient", "2026-01-01T00:00:09Z"),
            event("2/2 tasks in gang unschedulable: ...", "2026-01-01T00:00:10Z", "Warning"),
        ]
    )
    c, _ = waiting_job(kube)
    run(c)
    assert last_message(kube) == f"Scheduled 0/2: queue research: queue resource quota insufficient; {HELD}"
    assert kube.urls[0] == "/apis/scheduling.volcano.sh/v1beta1/namespaces/ns/podgroups/j-attempt-0"
    # One field selector: only this PodGroup's verdicts (the Warning one is the Pods' words again).
    assert "involvedObject.uid%3Dpg-1%2Creason%3DUnschedulable%2Ctype%3DNormal" in kube.urls[1]


def test_the_verdict_is_read_again_with_backoff_and_dropped_once_admitted() -> None:
    kube = VolcanoKube(events=[event("queue resource quota insufficient", "2026-01-01T00:00:09Z")])
    c, _ = waiting_job(kube)
    delays = run(c, times=3)
    # 5 s, 10 s, 20 s ... at most 2 minutes (jittered by up to a quarter): never idle, never a busy loop.
    waits = [d for d in delays if d is not None]
    assert len(waits) == 3 and all(5 <= d <= 150 for d in waits) and waits[0] < waits[1] < waits[2], delays
    kube.phase = "Inqueue"  # admitted: Volcano's allocate now speaks through the Pods
    run(c)
    assert last_message(kube) == f"Scheduled 0/2: {HELD}"


@pytest.mark.parametrize("refuse", [Forbidden, NotFound])
def test_a_refused_read_leaves_the_pods_words(refuse: type) -> None:
    kube = VolcanoKube(refuse=refuse)
    c, _ = waiting_job(kube)
    run(c)
    assert last_message(kube) == f"Scheduled 0/2: {HELD}"


def test_no_event_yet_says_not_admitted_and_other_gangs_are_not_read() -> None:
    reader = gang_reader.GangReader(cast(Kube, VolcanoKube()))
    assert asyncio.run(reader._read(volcano.INTEGRATION, "ns", "j-attempt-0")) == (
        None,
        "queue research: not admitted yet",
    )
    kube = VolcanoKube()
    pods = [
        pod(r, "Pending", scheduled=False, scheduling_reason="Unschedulable", scheduling_message="x") for r in range(2)
    ]
    c, _, _, _ = make(job_body(nodes=2, scheduling={"gang": "coscheduling"}), pods)
    c.kube = kube
    run(c)
    assert kube.urls == [] and last_message(kube) == "Scheduled 0/2: x"


def test_only_pods_the_integration_holds_are_read_for_and_the_newest_attempt() -> None:
    def p(rank: int, attempt: int = 0, **kw: Any) -> PodState:
        fields: dict[str, Any] = dict(scheduled=False, scheduling_reason="Unschedulable", scheduling_message=HELD) | kw
        return PodState(f"j-{rank}", rank, attempt, "Pending", **fields)

    job = parse_job(job_body(nodes=2, scheduling={"gang": "volcano"}))
    assert gang_reader.held(job, [p(0), p(1, attempt=1)]) == (volcano.INTEGRATION, 1)
    # Placed, going away (a finished or suspended job's), another job's leftover, or held by
    # nothing Volcano says more about (a gate): nothing to read.
    for pod_ in (
        p(0, scheduled=True),
        p(0, deleting=True),
        p(0, leftover=True),
        p(0, scheduling_reason="SchedulingGated"),
    ):
        assert gang_reader.held(job, [pod_]) is None, pod_
    assert gang_reader.held(
        parse_job(job_body(nodes=2, scheduling={"gang": "kueue", "queue": "q"})),
        [p(0, scheduling_reason="SchedulingGated")],
    ) == (kueue.INTEGRATION, 0)
