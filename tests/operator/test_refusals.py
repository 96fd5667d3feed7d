"""Refused creates at the controller level: a fake API that answers like a real API
server (403 quota, 422 invalid, a name held by a foreign object), no kopf, no HTTP."""

from __future__ import annotations

import asyncio
import copy
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from ddpjob.operator import controller as ctl, kube as k
from ddpjob.operator.refusals import BACKOFF_CAP, Backoff, Refusal
from tests.operator.test_controller import job_body, settle

pytestmark = pytest.mark.timeout(30)
T0 = datetime(2026, 1, 1, tzinfo=UTC)
QUOTA = 'pods "{name}" is forbidden: exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1'


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


class RefusingKube:
    """`refuse(name)` -> an APIError to raise for that create, or None; `objects` what exists."""

    def __init__(self) -> None:
        self.objects: dict[str, dict] = {}
        self.creates: list[str] = []
        self.statuses: list[dict] = []
        self.deletes: list[str] = []
        self.refuse = lambda name: None

    async def create(self, obj: dict, read_existing: bool = True):
        name = obj["metadata"]["name"]
        self.creates.append(name)
        error = self.refuse(name) if obj["kind"] == "Pod" else None
        if error is not None:
            raise error
        if name in self.objects:
            return copy.deepcopy(self.objects[name]) if read_existing else None, False
        self.objects[name] = copy.deepcopy(obj)
        return obj, True

    async def delete(self, url: str, **_: Any) -> bool:
        self.deletes.append(url.rsplit("/", 1)[1])
        return True

    async def patch_status(self, ns: str, name: str, patch: dict, resource_version: str | None = None) -> dict:
        self.statuses.append(dict(patch))
        return {"status": {k_: v for k_, v in patch.items() if v is not None}}


def make(nodes: int = 2):
    kube, events, clock = RefusingKube(), [], Clock()
    body = job_body(nodes=nodes)
    c = ctl.Controller(
        cast(k.Kube, kube),  # refuses creates as the API server would
        job_body=lambda ns, n: body,
        pods_of=lambda ns, n: [],
        post_event=lambda b, t, r, m: events.append((t, r, m)),
        clock=clock,
    )
    return c, kube, events, clock


def reconcile(c: ctl.Controller) -> float | None:
    return asyncio.run(settle(c))


def backoff(c: ctl.Controller) -> float:
    """The wait a reconcile asks for; it must ask for one."""
    delay = reconcile(c)
    assert delay is not None, "the reconcile asked for no wake-up"
    return delay


def pods_created(status: dict) -> list[tuple[str, str]]:
    return [(x["status"], x["reason"]) for x in status.get("conditions", []) if x["type"] == "PodsCreated"]


def test_a_quota_refusal_is_an_event_a_condition_and_a_message_then_backs_off() -> None:
    c, kube, events, _clock = make(nodes=2)
    kube.refuse = lambda name: k.Forbidden(403, "Forbidden", QUOTA.format(name=name))
    delay = reconcile(c)
    assert kube.creates == ["j", "j-0"]  # slow start: one refused Pod, not the whole gang
    st = kube.statuses[-1]
    assert st["phase"] == "Pending" and "exceeded quota" in st["message"] and st["message"].startswith("0/2")
    assert pods_created(st) == [("False", "Forbidden")]
    assert events == [("Warning", "FailedCreatePod", "Error creating: " + QUOTA.format(name="j-0"))]
    assert delay is not None and delay >= 0.5
    # Before the backoff is over a reconcile (a Pod event, say) creates nothing.
    kube.creates.clear()
    assert 0 < backoff(c) <= delay + 1e-3  # timedelta keeps microseconds
    assert kube.creates == []


def test_refused_creates_back_off_exponentially_then_recover_when_the_quota_is_raised() -> None:
    c, kube, _events, clock = make(nodes=2)
    kube.refuse = lambda name: k.Forbidden(403, "Forbidden", QUOTA.format(name=name))
    start = clock.now
    # Drive the controller as its work queue would: each pass when it asks to be woken.
    while clock.now - start < timedelta(seconds=10):
        clock.now += timedelta(seconds=backoff(c))
    refused = [n for n in kube.creates if n.startswith("j-")]
    assert 3 <= len(refused) <= 20, refused
    kube.refuse = lambda name: None  # the quota is raised
    for _ in range(5):
        delay = reconcile(c)
        if delay:
            clock.now += timedelta(seconds=delay)
    assert {"j-0", "j-1"} <= set(kube.objects)
    st = kube.statuses[-1]
    assert pods_created(st) == [("True", "Created")] and "waiting" not in st["message"]


def test_backoff_doubles_and_is_capped() -> None:
    b = Backoff()
    delays = [b.refused(Refusal("Pod", "p", "Forbidden", "no", 403), T0) for _ in range(12)]
    assert delays[1] > delays[0] * 1.7 and delays[3] > delays[2] * 1.7
    assert max(delays) <= BACKOFF_CAP * 1.1 and delays[-1] >= BACKOFF_CAP
    b.clear()
    assert b.wait(T0) == 0.0


def test_an_invalid_rendered_pod_fails_the_job_with_the_servers_message() -> None:
    c, kube, events, _ = make(nodes=1)
    message = 'Pod "j-0" is invalid: spec.containers[0].image: Required value'
    kube.refuse = lambda name: k.Invalid(422, "Invalid", message)
    reconcile(c)
    st = kube.statuses[-1]
    assert st["phase"] == "Failed" and message in st["message"]
    assert pods_created(st) == [("False", "Invalid")]
    assert ("Warning", "FailedCreatePod", "Error creating: " + message) in events


def test_a_pod_name_held_by_a_foreign_pod_is_never_adopted_and_backs_off() -> None:
    c, kube, events, clock = make(nodes=1)
    kube.objects["j-0"] = {"kind": "Pod", "metadata": {"name": "j-0", "namespace": "ns", "uid": "x"}}
    start = clock.now
    while clock.now - start < timedelta(seconds=5):
        clock.now += timedelta(seconds=backoff(c))
    # About 180 tries in 5 s before; now a handful, each reported, none deleting it.
    assert 2 <= kube.creates.count("j-0") <= 10
    assert kube.deletes == []
    st = kube.statuses[-1]
    assert pods_created(st) == [("False", "NotOwned")] and "'j-0'" in st["message"]
    assert any(r == "FailedCreatePod" and "not controlled by DDPJob 'j'" in m for _, r, m in events)


def test_a_service_name_held_by_a_foreign_service_blocks_the_pods() -> None:
    c, kube, events, _ = make(nodes=1)
    kube.objects["j"] = {
        "kind": "Service",
        "metadata": {
            "name": "j",
            "namespace": "ns",
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d1", "controller": True}
            ],
        },
    }
    reconcile(c)
    assert kube.creates == ["j"]  # no Pod without its Service
    assert any(r == "FailedCreateService" and "Deployment web" in m for _, r, m in events)


def test_a_namespace_being_deleted_posts_no_event() -> None:
    c, kube, events, _ = make(nodes=1)
    kube.refuse = lambda name: k.Forbidden(
        403,
        "Forbidden",
        "unable to create new content in namespace ns",
        {"causes": [{"reason": "NamespaceTerminating"}]},
    )
    reconcile(c)
    assert not [r for _, r, _ in events if r.startswith("FailedCreate")]


def test_a_server_error_is_retried_by_the_work_queue_not_reported_as_a_refusal() -> None:
    c, kube, events, _ = make(nodes=1)
    kube.refuse = lambda name: k.APIError(503, "ServiceUnavailable", "etcd is busy")
    with pytest.raises(k.APIError):
        reconcile(c)
    assert events == [] and not c._job(("ns", "j")).backoff.active


def test_a_webhook_denial_is_reported_even_with_code_500() -> None:
    c, kube, events, _ = make(nodes=1)
    message = 'admission webhook "policy.example.com" denied the request: GPU jobs need a team label'
    kube.refuse = lambda name: k.APIError(500, "", message)
    reconcile(c)
    assert ("Warning", "FailedCreatePod", "Error creating: " + message) in events
    assert pods_created(kube.statuses[-1]) == [("False", "WebhookDenied")]
