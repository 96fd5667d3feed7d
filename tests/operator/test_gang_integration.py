"""A gang integration is one module of description: a fake one (tests/support/fake_gang.py),
registered and nothing else, is checked by the API, rendered, configured, created before
its Pods, read while it holds them, and deleted when its attempt ends."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ddpjob import render
from ddpjob.api import gangs, spec
from ddpjob.operator import settings
from ddpjob.operator.api_paths import object_path
from ddpjob.operator.gang import GangSupport, api_group_path
from tests.operator.test_controller import FakeKube, job_body, make, pod, run
from tests.support import fake_gang

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(autouse=True)
def registered() -> Iterator[None]:
    gangs.register(fake_gang.INTEGRATION)
    yield
    gangs.unregister(fake_gang.NAME)


def body(**sched: Any) -> dict:
    return job_body(nodes=2, scheduling={"gang": fake_gang.NAME, **sched})


def test_the_api_knows_it_with_its_queues() -> None:
    assert spec.validate(body(queue="team-a")) == []
    job = spec.parse_job(body(queue="team-a"))
    assert job.scheduling.gang == fake_gang.NAME and job.scheduling.queue == "team-a"
    errors = [str(e) for e in spec.validate(job_body(nodes=2, scheduling={"gang": "kubernetes", "queue": "q"}))]
    assert errors == ["spec.scheduling.queue: only volcano, kueue and fakegang have queues (set gang to one of them)"]


def test_it_renders_its_pod_group_and_what_each_pod_carries() -> None:
    job = spec.parse_job(body())
    group, _service, *pods = render.render(job, restart_count=3)
    assert (group["apiVersion"], group["kind"], group["metadata"]["name"]) == (fake_gang.API, "Gang", "j-gang3")
    assert group["spec"] == {"size": 2, "queue": "everyone"}
    assert {p["metadata"]["labels"][fake_gang.LABEL] for p in pods} == {"j-gang3"}
    assert {p["spec"]["schedulerName"] for p in pods} == {"fake-scheduler"}


def test_the_operator_settings_enable_it_and_name_its_scheduler() -> None:
    config = settings.from_env({settings.GANG_INTEGRATIONS_ENV: "fakegang", "DDPJOB_FAKEGANG_SCHEDULER": "mine"})
    assert config.gang_integrations == {"fakegang"}
    job = spec.parse_job(body())
    pod_ = render.render_pod(job, 0, 0, config.gang_options)
    assert pod_["spec"]["schedulerName"] == "mine"
    assert api_group_path(fake_gang.NAME) == f"/apis/{fake_gang.API}"
    assert object_path(fake_gang.API, "Gang", "ns", "g") == f"/apis/{fake_gang.API}/namespaces/ns/gangs/g"


class GangObjects(FakeKube):
    """Serves the attempt's Gang (and where it says to look further)."""

    def __init__(self, gang_status: dict) -> None:
        super().__init__()
        self.gang_status = gang_status
        self.urls: list[str] = []
        self.deleted: list[str] = []

    async def get(self, url: str) -> dict:
        self.urls.append(url)
        if url.endswith("/quota"):
            return {"status": {"waiting": "2 GPUs short"}}
        return {"metadata": {"name": url.rsplit("/", 1)[1]}, "status": self.gang_status}

    async def delete(self, url: str, **kw: Any) -> bool:
        self.deleted.append(url)
        return await super().delete(url, **kw)


def held_pods() -> list:
    return [
        pod(r, "Pending", scheduled=False, scheduling_reason=fake_gang.HELD, scheduling_message="held")
        for r in range(2)
    ]


def test_the_controller_creates_it_first_reads_what_it_says_and_deletes_it_when_the_attempt_ends() -> None:
    c, _, _, index = make(body())
    c.kube = kube = GangObjects({"see": "/apis/gangs.example.com/v1/namespaces/ns/quota"})
    c.gang = GangSupport(enabled=frozenset({fake_gang.NAME}))
    run(c)
    creates = [name for kind, name in kube.calls if kind == "create"]
    assert creates == ["j-gang0", "j", "j-0", "j-1"]  # the group before the Pods
    index["pods"] = held_pods()
    delays = run(c, times=3)
    # The reads the description names, in its order, with its group name.
    assert kube.urls[:2] == [
        "/apis/gangs.example.com/v1/namespaces/ns/gangs/j-gang0",
        "/apis/gangs.example.com/v1/namespaces/ns/quota",
    ]
    status = [p for kind, p in kube.calls if kind == "status"][-1]
    assert status["message"] == "Scheduled 0/2: fake queue: 2 GPUs short; held"  # its words, then the Pods'
    gang_condition = next(x for x in status["conditions"] if x["type"] == "GangScheduled")
    assert gang_condition["reason"] == "FakeQueued"
    # Read again with its own backoff: 1 s, 2 s, 4 s (each stretched by up to a quarter).
    assert all(d is not None and lo <= d <= lo * 1.25 for lo, d in zip((1, 2, 4), delays, strict=True)), delays
    # The job fails: the ended attempt's Gang goes.
    index["body"] = {**body(), "status": {**status, "phase": "Failed"}}
    c._jobs[("ns", "j")].status = None
    index["pods"] = [pod(0, "Failed", exit_code=1), pod(1, "Failed", exit_code=1)]
    run(c)
    assert kube.deleted == [object_path(fake_gang.API, "Gang", "ns", "j-gang0")]


def test_unregistered_it_is_unknown_everywhere() -> None:
    gangs.unregister(fake_gang.NAME)
    try:
        assert any("spec.scheduling.gang" in str(e) for e in spec.validate(body()))
        with pytest.raises(settings.SettingsError):
            settings.from_env({settings.GANG_INTEGRATIONS_ENV: "fakegang"})
    finally:
        gangs.register(fake_gang.INTEGRATION)


def test_a_gang_restart_deletes_the_ended_attempts_group_and_keeps_the_new_one_by_its_own_name() -> None:
    c, _, _, index = make(body())
    c.kube = kube = GangObjects({})
    run(c)
    status = [p for kind, p in kube.calls if kind == "status"][-1]
    index["body"] = {**body(), "status": {**status, "phase": "Running"}}
    c._jobs[("ns", "j")].status = None
    index["pods"] = [pod(0), pod(1, "Failed", exit_code=3)]
    run(c)  # Restarting: attempt 1
    index["pods"] = []
    run(c)  # attempt 1's group and Pods are made
    assert [name for kind, name in kube.calls if kind == "create"].count("j-gang1") == 1
    assert kube.deleted[-1:] == [object_path(fake_gang.API, "Gang", "ns", "j-gang0")]
    assert set(c._jobs[("ns", "j")].pod_groups) == {"j-gang1"}  # the live attempt's is kept
