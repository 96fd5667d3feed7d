"""The controller alone: a fake API and hand-fed indices, no kopf, no HTTP."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from ddpjob.job.observe import PodState
from ddpjob.operator import controller as ctl, status_writes
from ddpjob.operator.kube import Conflict, Kube

pytestmark = pytest.mark.timeout(30)
NOW = datetime(2026, 1, 1, tzinfo=UTC)


class FakeKube:
    """Records calls; `fail` maps a call kind to how many times it raises first."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.fail: dict[str, int] = {}
        self.fail_names: dict[str, int] = {}
        self.existing: set[str] = set()
        self.versions: list[str | None] = []  # resourceVersion of each status patch
        self.stored: dict | None = None  # the DDPJob as the server has it, when a test sets it

    def _maybe_fail(self, kind: str) -> None:
        if self.fail.get(kind, 0) > 0:
            self.fail[kind] -= 1
            raise RuntimeError(f"injected {kind} failure")

    async def create(self, obj: dict, read_existing: bool = True):
        self.calls.append(("create", obj["metadata"]["name"]))
        self._maybe_fail("create-" + obj["kind"])
        if self.fail_names.get(obj["metadata"]["name"], 0) > 0:
            self.fail_names[obj["metadata"]["name"]] -= 1
            raise RuntimeError("injected failure")
        if obj["metadata"]["name"] in self.existing:
            return (obj if read_existing else None), False
        self.existing.add(obj["metadata"]["name"])
        return obj, True

    async def delete(self, url: str, **_: Any) -> bool:
        self.calls.append(("delete", url.rsplit("/", 1)[1]))
        self._maybe_fail("delete")
        return True

    async def patch_status(self, ns: str, name: str, patch: dict, resource_version: str | None = None) -> dict:
        self.calls.append(("status", dict(patch)))
        self.versions.append(resource_version)
        self._maybe_fail("status")
        if self.stored is not None:  # optimistic concurrency, like the API server
            if resource_version and resource_version != self.stored["metadata"]["resourceVersion"]:
                raise Conflict(409, "Conflict", "the object has been modified")
            status = {k: v for k, v in {**self.stored.get("status", {}), **patch}.items() if v is not None}
            rv = str(int(self.stored["metadata"]["resourceVersion"]) + 1)
            self.stored = {
                **self.stored,
                "metadata": {**self.stored["metadata"], "resourceVersion": rv},
                "status": status,
            }
            return self.stored
        return {"status": {k: v for k, v in patch.items() if v is not None}}

    async def get(self, url: str) -> dict:
        self.calls.append(("get", url.rsplit("/", 1)[1]))
        assert self.stored is not None, "nothing stored to get"
        return self.stored


def job_body(**spec: Any) -> dict:
    spec.setdefault("image", "img")
    spec.setdefault("restartBackoffSeconds", 0)
    return {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {"name": "j", "namespace": "ns", "uid": "u1", "generation": 1},
        "spec": spec,
    }


def make(body: dict, pods: list[ctl.IndexedPod] | None = None):
    kube, events = FakeKube(), []
    index: dict[str, Any] = {"pods": pods if pods is not None else [], "body": body}
    c = ctl.Controller(
        cast(Kube, kube),  # the calls the controller makes, answered in memory
        job_body=lambda ns, n: index["body"],
        pods_of=lambda ns, n: index["pods"],
        post_event=lambda body, t, r, m: events.append((t, r, m)),
        clock=lambda: NOW,
    )
    return c, kube, events, index


async def settle(c: ctl.Controller, key: tuple[str, str] = ("ns", "j")) -> float | None:
    """Reconcile as the work queue does: a pass that asks to run again at once (0, after
    it created Pods) is followed by the next, which observes what it did."""
    for _ in range(5):
        wake = await c.reconcile(key)
        if wake != 0.0:
            return wake
    return wake


def once(c: ctl.Controller) -> float | None:
    """One observe -> plan -> act, no follow-up pass: what a single pass decides."""
    return asyncio.run(c.reconcile(("ns", "j")))


def run(c: ctl.Controller, times: int = 1) -> list[float | None]:
    async def go():
        return [await settle(c) for _ in range(times)]

    return asyncio.run(go())


def pod(rank: int, phase: str = "Running", restart: int = 0, owner: str | None = "u1", **kw: Any) -> ctl.IndexedPod:
    kw.setdefault("uid", f"pod-uid-{restart}-{rank}")  # as every Pod the watch shows has
    return owner, PodState(name=f"j-{rank}", node_rank=rank, restart_count=restart, phase=phase, **kw)


def test_creates_service_and_gang_once_even_before_the_index_catches_up() -> None:
    c, kube, events, _ = make(job_body(nodes=3))
    run(c, times=3)  # the index never shows the Pods: expectations stand in for them
    creates = [name for kind, name in kube.calls if kind == "create"]
    assert creates == ["j", "j-0", "j-1", "j-2"]
    statuses = [p for kind, p in kube.calls if kind == "status"]
    assert len(statuses) == 1 and statuses[0]["phase"] == "Pending" and "0/3" in statuses[0]["message"]
    assert [r for _, r, _ in events] == ["Created"]


def test_no_write_when_nothing_changed() -> None:
    c, kube, _, _index = make(job_body(nodes=2), [pod(0), pod(1)])
    run(c)
    assert [k for k, _ in kube.calls] == ["status"]
    kube.calls.clear()
    run(c, times=2)
    assert kube.calls == []


def test_gang_restart_writes_status_before_deleting() -> None:
    body = job_body(nodes=2, restartPolicy="OnFailure")
    body["status"] = {"phase": "Running", "restarts": 0, "startTime": "2026-01-01T00:00:00Z"}
    c, kube, events, _ = make(body, [pod(0), pod(1, "Failed", exit_code=3)])
    once(c)
    kinds = [k for k, _ in kube.calls]
    assert kinds == ["status", "delete", "delete"]
    assert kube.calls[0][1]["restarts"] == 1 and kube.calls[0][1]["phase"] == "Restarting"
    restarting = [m for _, r, m in events if r == "Restarting"]
    assert restarting and "j-1" in restarting[0] and "exit code 3" in restarting[0]
    assert c.metrics.sample("ddpjob_gang_restarts_total") == 1


def test_a_gang_restart_deletes_each_pod_with_the_uid_it_was_seen_with() -> None:
    """As PodGroups are deleted: a Pod made again under the name since is not the one meant."""
    body = job_body(nodes=2, restartPolicy="OnFailure")
    body["status"] = {"phase": "Running", "restarts": 0, "startTime": "2026-01-01T00:00:00Z"}
    c, kube, _, _ = make(body, [pod(0, uid="uid-0"), pod(1, "Failed", exit_code=3, uid="uid-1")])
    preconditions: list[tuple[str, Any]] = []
    delete = kube.delete

    async def recorded(url: str, **kw: Any) -> bool:
        preconditions.append((url.rsplit("/", 1)[1], kw.get("uid")))
        return await delete(url, **kw)

    kube.delete = recorded
    once(c)
    assert sorted(preconditions) == [("j-0", "uid-0"), ("j-1", "uid-1")]


def test_a_failed_status_write_deletes_nothing() -> None:
    body = job_body(nodes=2, restartPolicy="OnFailure")
    body["status"] = {"phase": "Running", "restarts": 0, "startTime": "2026-01-01T00:00:00Z"}
    c, kube, _, _ = make(body, [pod(0), pod(1, "Failed", exit_code=3)])
    kube.fail["status"] = 1
    with pytest.raises(RuntimeError):
        run(c)
    assert [k for k, _ in kube.calls] == ["status"]


def test_a_half_created_gang_is_completed_by_the_retry() -> None:
    c, kube, _, _ = make(job_body(nodes=4))
    kube.fail_names["j-2"] = 1  # slow start: batches [j-0], [j-1, j-2], [j-3]
    with pytest.raises(RuntimeError):
        run(c)
    assert kube.existing == {"j", "j-0", "j-1"}  # the batch that failed held back the next
    kube.calls.clear()
    run(c)
    assert kube.existing == {"j", "j-0", "j-1", "j-2", "j-3"}
    # Only the missing Pods are created again; the Service is known to exist.
    assert [n for k, n in kube.calls if k == "create"] == ["j-2", "j-3"]


def test_invalid_spec_fails_once_and_creates_nothing() -> None:
    c, kube, events, _ = make(job_body(nodes=0, backend="mpi"))
    run(c, times=2)
    assert [k for k, _ in kube.calls] == ["status"]
    st = kube.calls[0][1]
    assert st["phase"] == "Failed" and "spec.nodes" in st["message"] and "spec.backend" in st["message"]
    assert [c["reason"] for c in st["conditions"] if c["type"] == "Failed"] == ["InvalidSpec"]
    assert [(t, r) for t, r, _ in events] == [("Warning", "InvalidSpec")]


def test_pods_of_an_earlier_job_with_the_same_name_are_leftovers() -> None:
    c, kube, _, _ = make(job_body(nodes=1), [pod(0, owner="old-uid")])
    run(c)
    # Never deleted by this job (the garbage collector removes it): the job waits, and says so.
    assert not [k for k, _ in kube.calls if k == "delete"]
    assert ("create", "j-0") not in kube.calls  # waits for the name to be free
    st = kube.calls[-1][1]
    assert st["phase"] == "Pending" and "j-0" in st["message"] and "earlier DDPJob" in st["message"]
    assert [(x["status"], x["reason"]) for x in st["conditions"] if x["type"] == "PodsCreated"] == [
        ("False", "NotOwned")
    ]


def test_pods_without_a_ddpjob_owner_are_ignored() -> None:
    c, kube, _, _ = make(job_body(nodes=1), [pod(0, owner=None)])
    run(c)
    assert ("create", "j-0") in kube.calls and not [k for k, _ in kube.calls if k == "delete"]


def test_finished_job_asks_to_be_looked_at_again_for_its_ttl() -> None:
    body = job_body(nodes=1, ttlSecondsAfterFinished=30)
    body["status"] = {"phase": "Running", "restarts": 0, "startTime": "2026-01-01T00:00:00Z"}
    c, _kube, _, _ = make(body, [pod(0, "Succeeded", exit_code=0)])
    assert once(c) == 0.0  # the phase changed: plan again
    assert once(c) == pytest.approx(31.0)  # the TTL timer (from the end of completionTime's second)


def test_status_patch_removes_dropped_keys() -> None:
    assert status_writes.status_patch({"a": 1, "startTime": "t"}, {"a": 2}) == {"a": 2, "startTime": None}
    # At every depth: a merge patch merges objects, so an ETA the plan dropped must be nulled.
    before = {"progress": {"step": 5, "eta": "1m", "etaSeconds": 60}, "lastFailure": {"errorLine": "x", "pod": "p"}}
    after = {"progress": {"step": 6}, "lastFailure": {"pod": "q"}}
    patch = status_writes.status_patch(before, after)
    assert patch == {
        "progress": {"step": 6, "eta": None, "etaSeconds": None},
        "lastFailure": {"pod": "q", "errorLine": None},
    }


def test_indexed_pod_reads_the_controller_owner() -> None:
    body = {
        "metadata": {
            "name": "j-0",
            "labels": {"ddpjob.io/node-rank": "0", "ddpjob.io/restart-count": "2"},
            "ownerReferences": [
                {"apiVersion": "ddpjob.io/v1alpha1", "kind": "DDPJob", "uid": "u9", "controller": True}
            ],
        },
        "status": {"phase": "Running"},
    }
    indexed = ctl.indexed_pod(body)
    assert indexed is not None
    owner, state = indexed
    assert owner == "u9" and state.restart_count == 2 and state.phase == "Running"
    assert ctl.indexed_pod({"metadata": {"name": "x", "labels": {}}}) is None


def test_triggers_coalesce_into_one_reconcile_at_a_time() -> None:
    async def go() -> tuple[int, int]:
        c, _, _, _ = make(job_body(nodes=2))
        calls = running = most = 0

        async def counting(job):  # the reconcile alone would ask for more passes (requeue)
            nonlocal calls, running, most
            calls, running = calls + 1, running + 1
            most = max(most, running)
            await asyncio.sleep(0.05)
            running -= 1
            return None

        c.reconcile = counting
        c.trigger("ns", "j")
        await asyncio.sleep(0.01)  # the first pass is running ...
        for _ in range(9):
            c.trigger("ns", "j")  # ... and these come meanwhile
        while c.busy:
            await asyncio.sleep(0.01)
        await c.close()
        return calls, most

    # One pass running, one more for everything that came meanwhile, never two at once.
    assert asyncio.run(go()) == (2, 1)


def test_status_write_carries_the_resource_version_it_was_planned_from():
    body = job_body(nodes=2)
    body["metadata"]["resourceVersion"] = "7"
    c, kube, _, _ = make(body, [pod(0), pod(1)])
    run(c)
    assert kube.versions == ["7"]


def test_metadata_only_change_is_written_again_onto_the_current_version():
    # kopf patched its annotations after the index was read: the status is unchanged,
    # so the write is made again onto the version the server has.
    body = job_body(nodes=2)
    body["metadata"]["resourceVersion"] = "7"
    c, kube, _, _ = make(body, [pod(0), pod(1)])
    kube.stored = {**body, "metadata": {**body["metadata"], "resourceVersion": "8"}, "status": {}}
    run(c)
    assert kube.versions == ["7", "8"]
    assert kube.stored["status"]["phase"] == "Running"


def test_status_changed_by_another_writer_is_never_overwritten():
    # Another replica already counted a restart: this pass, planned from the older
    # status, writes nothing and the next pass plans from the stored one.
    body = job_body(nodes=2, maxRestarts=5)
    body["metadata"]["resourceVersion"] = "7"
    c, kube, _, _index = make(body, [pod(0), pod(1, "Failed", exit_code=3)])
    other = {"phase": "Restarting", "restarts": 1, "message": "restarting by the other replica"}
    kube.stored = {**body, "metadata": {**body["metadata"], "resourceVersion": "9"}, "status": other}
    with pytest.raises(ctl.StatusChanged):
        run(c)
    assert kube.stored["status"] == other
    assert not [k for k, _ in kube.calls if k == "delete"]  # nothing acted on the stale plan
    kube.calls.clear()
    run(c)  # the next pass starts from restarts=1, not 0
    assert all(p.get("restarts", 1) >= 1 for k, p in kube.calls if k == "status")


def test_counts_alone_are_batched_but_a_phase_change_is_written_at_once() -> None:
    body = job_body(nodes=4)
    clock = [100.0]
    c, kube, _, index = make(body, [pod(0, "Pending"), pod(1, "Pending"), pod(2, "Pending"), pod(3, "Pending")])
    c.monotonic = lambda: clock[0]
    run(c)
    index["pods"] = [pod(0), pod(1), pod(2, "Pending"), pod(3, "Pending")]
    clock[0] += 0.05
    [again] = run(c)  # 2/4 running, 0.05 s after the last write: held, and a look again later
    statuses = [p for kind, p in kube.calls if kind == "status"]
    assert len(statuses) == 1 and again == pytest.approx(0.15)
    clock[0] += 0.2
    run(c)  # the interval has passed: the count is written
    statuses = [p for kind, p in kube.calls if kind == "status"]
    assert len(statuses) == 2 and statuses[-1]["readyNodes"] == 2
    index["pods"] = [pod(0), pod(1), pod(2), pod(3)]
    clock[0] += 0.01
    run(c)  # Running: a phase change goes out at once
    statuses = [p for kind, p in kube.calls if kind == "status"]
    assert len(statuses) == 3 and statuses[-1]["phase"] == "Running"
