"""The operator's memory of a disrupted member (observer.with_disrupted): a Pod evicted and
gone before the operator looked is still seen as the disrupted member it was, for the step
that handles its loss, and no longer once a status has recorded it: an elastic job makes the
index again under the same name, which the remembered Pod would otherwise hold until the job
ended (a drained node's evicted Pod in the kind tier)."""

from __future__ import annotations

from ddpjob.job.observe import PodState
from ddpjob.operator.observer import JobMemory, with_disrupted

UID = "uid-1"


def evicted(name: str = "job-1", rank: int = 1) -> PodState:
    return PodState(
        name=name,
        node_rank=rank,
        restart_count=0,
        phase="Failed",
        exit_code=143,
        reason="EvictionByEvictionAPI",
        disruption="EvictionByEvictionAPI",
    )


def memory() -> JobMemory:
    job = JobMemory(("ns", "job"))
    job.disrupted["job-1"] = (UID, evicted())
    return job


def test_a_vanished_disrupted_member_is_seen_until_a_status_records_its_loss() -> None:
    job, running = memory(), {"phase": "Running", "restarts": 0}
    survivor = PodState(name="job-0", node_rank=0, restart_count=0, phase="Running")
    (_, remembered) = with_disrupted(job, [survivor], UID, running)
    assert remembered.name == "job-1" and remembered.deleting and remembered.disruption == "EvictionByEvictionAPI"
    # The elastic plan recorded the loss as a lost index not made again yet: the name is free.
    job = memory()
    recorded = {"lostIndices": [{"index": 1, "losses": 1, "lostAt": "2026-01-01T00:00:00Z"}]}
    assert with_disrupted(job, [survivor], UID, {**running, **recorded}) == [survivor]
    assert job.disrupted == {}
    # A last failure may name the same Pod of an earlier attempt (a rigid gang preempted
    # twice), and an index made again after an earlier loss is no record of this one.
    for earlier in (
        {"lastFailure": {"pod": "job-1", "reason": "EvictionByEvictionAPI"}},
        {"lostIndices": [{"index": 1, "losses": 1, "lostAt": "2026-01-01T00:00:00Z", "replaced": True}]},
    ):
        job = memory()
        assert [p.name for p in with_disrupted(job, [survivor], UID, {**running, **earlier})] == ["job-0", "job-1"]


def test_the_memory_is_kept_while_the_pod_is_seen_and_dropped_for_another_attempt_or_owner() -> None:
    job = memory()
    seen = evicted()
    assert with_disrupted(job, [seen], UID, {"phase": "Running", "restarts": 0}) == [seen]
    assert "job-1" in job.disrupted
    assert with_disrupted(job, [], UID, {"phase": "Restarting", "restarts": 1}) == []
    assert job.disrupted == {}
    job = memory()
    assert with_disrupted(job, [], "another-uid", {"phase": "Running", "restarts": 0}) == []
