"""The controller and gang scheduling, with a fake API: the PodGroup comes before the Pods,
goes when its attempt ends, a missing integration is a clear waiting condition, and a
preempted member that vanished with its mark does not use up maxRestarts."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ddpjob.operator.api_paths import object_path
from ddpjob.operator.gang import GangSupport
from ddpjob.operator.kube import APIError, NotFound
from tests.operator.test_controller import FakeKube, job_body, make, once, pod, run

pytestmark = pytest.mark.timeout(30)


class GangKube(FakeKube):
    def __init__(self) -> None:
        super().__init__()
        self.terminating: set[str] = set()
        self.missing_kinds: set[str] = set()
        self.urls: list[str] = []

    async def create(self, obj: dict, read_existing: bool = True):
        if obj["kind"] in self.missing_kinds:
            self.calls.append(("create", obj["metadata"]["name"]))
            raise NotFound(404, "NotFound", "the server could not find the requested resource")
        result = await super().create(obj, read_existing)
        if obj["metadata"]["name"] in self.terminating:
            return {**obj, "metadata": {**obj["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}, False
        return result

    async def delete(self, url: str, **kw: Any) -> bool:
        self.urls.append(url)
        return await super().delete(url, **kw)

    async def served(self, url: str) -> bool:
        return False


def with_gang_kube(c) -> GangKube:
    c.kube = GangKube()
    return c.kube


def conditions(status: dict) -> dict:
    return {c["type"]: c for c in status.get("conditions", [])}


def last_status(kube) -> dict:
    return [p for kind, p in kube.calls if kind == "status"][-1]


def test_pod_group_is_created_before_the_pods():
    c, _, _events, _ = make(job_body(nodes=2, scheduling={"gang": "kubernetes"}))
    kube = with_gang_kube(c)
    run(c)
    creates = [name for kind, name in kube.calls if kind == "create"]
    assert creates == ["j-attempt-0", "j", "j-0", "j-1"]


def test_the_ended_attempts_pod_group_is_deleted_on_restart():
    body = job_body(nodes=2, restartPolicy="OnFailure", scheduling={"gang": "volcano"})
    c, _, _, index = make(body)
    kube = with_gang_kube(c)
    run(c)
    index["body"] = {**body, "status": {**last_status(kube), "phase": "Running"}}
    c._jobs[("ns", "j")].status = None
    index["pods"] = [pod(0), pod(1, "Failed", exit_code=3)]
    run(c)
    assert object_path("scheduling.volcano.sh/v1beta1", "PodGroup", "ns", "j-attempt-0") in kube.urls
    kube.calls.clear()
    index["pods"] = []
    run(c, times=2)
    creates = [name for kind, name in kube.calls if kind == "create"]
    assert creates[0] == "j-attempt-1" and set(creates[1:]) >= {"j-0", "j-1"}


def test_suspend_deletes_the_pod_group_and_resume_waits_for_it_to_go():
    body = job_body(nodes=2, scheduling={"gang": "kubernetes"})
    c, _, _events, index = make(body)
    kube = with_gang_kube(c)
    run(c)
    index["body"] = {**body, "spec": {**body["spec"], "suspend": True}, "status": last_status(kube)}
    c._jobs[("ns", "j")].status = None
    index["pods"] = [pod(0, "Pending"), pod(1, "Pending")]
    run(c)
    assert object_path("scheduling.k8s.io/v1beta1", "PodGroup", "ns", "j-attempt-0") in kube.urls
    # resume while the old PodGroup still waits on its protection finalizer
    kube.terminating.add("j-attempt-0")
    index["body"] = {**body, "status": last_status(kube)}
    c._jobs[("ns", "j")].status = None
    index["pods"] = []
    kube.calls.clear()
    delay = run(c)[0]
    assert [name for kind, name in kube.calls if kind == "create"] == ["j-attempt-0"]  # no Pods yet
    cond = conditions(last_status(kube))["GangScheduled"]
    assert cond["status"] == "False" and cond["reason"] == "PodGroupTerminating"
    assert delay and delay > 0
    kube.terminating.clear()
    kube.calls.clear()
    run(c)
    assert {"j-0", "j-1"} <= {name for kind, name in kube.calls if kind == "create"}


def test_an_integration_that_is_off_is_a_clear_waiting_condition():
    c, _, events, _ = make(job_body(nodes=2, scheduling={"gang": "volcano"}))
    kube = with_gang_kube(c)
    c.gang = GangSupport(enabled=frozenset({"kubernetes"}))
    delays = run(c, times=3)
    assert not [name for kind, name in kube.calls if kind == "create"]
    status = last_status(kube)
    assert status["phase"] == "Pending" and "gang.volcano.enabled" in status["message"]
    assert conditions(status)["GangScheduled"]["reason"] == "GangIntegrationUnavailable"
    assert [r for _, r, _ in events] == ["GangIntegrationUnavailable"]  # one Event, not one per retry
    assert delays[0] < delays[1] < delays[2]  # backs off


def test_a_missing_crd_is_reported_and_rechecked():
    c, _, _, _ = make(job_body(nodes=2, scheduling={"gang": "coscheduling"}))
    kube = with_gang_kube(c)
    kube.missing_kinds.add("PodGroup")
    run(c)
    status = last_status(kube)
    assert "scheduling.x-k8s.io/v1alpha1" in status["message"]
    assert conditions(status)["GangScheduled"]["reason"] == "GangIntegrationUnavailable"


def test_startup_check_logs_each_missing_api(caplog):
    gang = GangSupport.from_env({"DDPJOB_GANG_INTEGRATIONS": "kubernetes,volcano,kueue"})
    served = {"/apis/scheduling.k8s.io/v1beta1"}

    async def exists(path: str) -> bool:
        return path in served

    asyncio.run(gang.check_apis(exists))
    assert set(gang.missing) == {"volcano"}
    assert [r.levelname for r in caplog.records if "gang integration volcano is enabled but" in r.message] == ["ERROR"]
    assert gang.unavailable("kubernetes") is None and gang.unavailable("kueue") is None
    assert "not enabled" in gang.unavailable("coscheduling")


def test_a_failing_startup_check_is_logged_not_left_in_its_task(caplog):
    # The startup check runs in a task nobody awaits: an API server that still fails after
    # the client's retries must end in a warning, not in "Task exception was never retrieved".
    gang = GangSupport.from_env({"DDPJOB_GANG_INTEGRATIONS": "volcano"})

    async def exists(path: str) -> bool:
        raise APIError(500, "InternalError", "etcdserver: request timed out")

    async def main() -> None:
        task = asyncio.get_running_loop().create_task(gang.check_apis_in_background(exists))
        await asyncio.wait([task])
        assert task.exception() is None

    asyncio.run(main())
    warned = [r for r in caplog.records if "could not ask API discovery" in r.message]
    assert [r.levelname for r in warned] == ["WARNING"] and "etcdserver" in warned[0].message
    assert gang.missing == {}


def test_chart_settings_reach_the_rendered_pods():
    gang = GangSupport.from_env({"DDPJOB_COSCHEDULING_SCHEDULER": "cosched", "DDPJOB_GANG_INTEGRATIONS": ""})
    assert gang.options.schedulers["coscheduling"] == "cosched" and gang.enabled == frozenset()


def test_a_preempted_member_that_vanished_is_still_a_disruption():
    body = job_body(nodes=2, restartPolicy="OnFailure", maxRestarts=0)
    body["status"] = {"phase": "Running", "restarts": 0, "startTime": "2026-01-01T00:00:00Z"}
    c, kube, _, index = make(body, [pod(0), pod(1)])
    marked = {
        "metadata": {
            "name": "j-1",
            "labels": {"ddpjob.io/node-rank": "1", "ddpjob.io/restart-count": "0"},
            "ownerReferences": [
                {"apiVersion": "ddpjob.io/v1alpha1", "kind": "DDPJob", "uid": "u1", "controller": True}
            ],
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}],
        },
    }
    c.pod_changed("ns", "j", marked)  # the watch saw the mark ...
    index["pods"] = [pod(0)]  # ... and the deletion, before any reconcile looked
    once(c)
    status = last_status(kube)
    assert status["phase"] == "Restarting", status["message"]
    assert status["disruptions"] == 1 and "not counted against maxRestarts=0" in status["message"]


class ForeignGroupKube(GangKube):
    """A PodGroup named as the job's next attempt, made beforehand by someone else."""

    def __init__(self) -> None:
        super().__init__()
        self.foreign = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {
                "name": "j-attempt-0",
                "namespace": "ns",
                "uid": "not-the-job",
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "other", "controller": True}
                ],
            },
        }
        self.delete_kwargs: list[dict] = []

    async def create(self, obj: dict, read_existing: bool = True):
        if obj["kind"] == "PodGroup":
            self.calls.append(("create", obj["metadata"]["name"]))
            return self.foreign, False  # a 409, read back
        return await super().create(obj, read_existing)

    async def delete(self, url: str, **kw: Any) -> bool:
        self.delete_kwargs.append(kw)
        return await super().delete(url, **kw)


def test_a_pod_group_held_by_another_controller_is_never_adopted_or_deleted():
    body = job_body(nodes=2, scheduling={"gang": "volcano"})
    c, _, _, index = make(body)
    c.kube = kube = ForeignGroupKube()
    run(c)
    assert [name for kind, name in kube.calls if kind == "create"] == ["j-attempt-0"]  # no Pods
    cond = conditions(last_status(kube))["GangScheduled"]
    assert cond["status"] == "False" and cond["reason"] == "NotOwned"
    assert "'j-attempt-0' already exists and is not controlled by DDPJob 'j'" in cond["message"]
    assert c._jobs[("ns", "j")].pod_groups == {}  # not the job's: it never deletes it
    index["body"] = {**body, "status": {**last_status(kube), "phase": "Failed"}}
    c._jobs[("ns", "j")].status = None
    run(c)
    assert not any("podgroups" in u for u in kube.urls)


def test_the_jobs_own_pod_group_is_deleted_with_its_uid_as_precondition():
    body = job_body(nodes=2, restartPolicy="OnFailure", scheduling={"gang": "volcano"})
    c, _, _, index = make(body)
    kube = with_gang_kube(c)
    deletes: list[dict] = []
    original, create = kube.delete, kube.create

    async def created_with_uid(obj: dict, read_existing: bool = True):
        stored, made = await create(obj, read_existing)  # the server gives every object a uid
        return (
            {**stored, "metadata": {**stored["metadata"], "uid": f"uid-of-{obj['metadata']['name']}"}}
            if stored
            else stored
        ), made

    kube.create = created_with_uid

    async def delete(url: str, **kw: Any) -> bool:
        deletes.append({"url": url, **kw})
        return await original(url, **kw)

    kube.delete = delete
    run(c)
    uid = c._jobs[("ns", "j")].pod_groups["j-attempt-0"][2]
    index["body"] = {**body, "status": {**last_status(kube), "phase": "Running"}}
    c._jobs[("ns", "j")].status = None
    index["pods"] = [pod(0), pod(1, "Failed", exit_code=3)]
    run(c)
    group = [d for d in deletes if d["url"].endswith("/podgroups/j-attempt-0")]
    assert uid == "uid-of-j-attempt-0" and group and group[0].get("uid") == uid
