"""A gang integration that exists only in the tests: the one module a new integration
is. Registered by the tests that use it (`api.gangs.register`); nothing else of ddpjob
names it, so every place that serves it learns of it from this description alone.

It has a PodGroup of its own (a `Gang` of `gangs.example.com/v1`), queues, a scheduler
named by an operator setting, a group name unlike the built-in ones, and a verdict read
from its Gang object while it holds the Pods (`FakeHeld`): two reads when the Gang says
where to look further (`status.see`), one otherwise.
"""

from __future__ import annotations

from typing import Any

from ddpjob.api.gangs.base import GangJob, Integration, Objects, PodGroupKind, Reads, SchedulerSetting
from ddpjob.backoff import Backoff

NAME = "fakegang"
API = "gangs.example.com/v1"
KIND = PodGroupKind(API, "Gang", "gangs")
LABEL = "gangs.example.com/gang"
HELD = "FakeHeld"
SCHEDULER = SchedulerSetting("DDPJOB_FAKEGANG_SCHEDULER", "fake-scheduler")
RECHECK = Backoff(base=1.0, cap=8.0)


def group_name(job: GangJob, attempt: int) -> str:
    return f"{job.name}-gang{attempt}"


def pod_group_spec(job: GangJob, pod: dict) -> dict[str, Any]:
    return {"size": job.min_nodes, "queue": job.scheduling.queue or "everyone"}


def join(pod: dict, job: GangJob, group: str, scheduler: str | None) -> None:
    pod["metadata"]["labels"][LABEL] = group
    if scheduler:
        pod["spec"]["schedulerName"] = scheduler


def next_read(namespace: str, group: str, read: Objects) -> str | None:
    if not read:
        return f"/apis/{API}/namespaces/{namespace}/gangs/{group}"
    see = (read[0].get("status") or {}).get("see")
    return see if len(read) == 1 and see else None


def verdict(read: Objects) -> tuple[str | None, str] | None:
    words = (read[-1].get("status") or {}).get("waiting") if read else None
    return ("FakeQueued", f"fake queue: {words}") if words else None


INTEGRATION = Integration(
    name=NAME,
    needs="the fake gangs.example.com/v1 Gang CRD",
    join=join,
    group_name=group_name,
    pod_group=KIND,
    pod_group_spec=pod_group_spec,
    queue="FakeQueue",
    scheduler=SCHEDULER,
    reads=Reads(held=HELD, next=next_read, verdict=verdict, recheck=RECHECK),
)
