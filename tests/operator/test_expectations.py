"""Expectations alone: they stand in for the watch until it catches up, then step aside."""

from __future__ import annotations

from typing import Any

from ddpjob.job.observe import PodState
from ddpjob.operator.expectations import Expectations


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def pod(name: str, rank: int = 0, attempt: int = 0, **kw) -> PodState:
    return PodState(name=name, node_rank=rank, restart_count=attempt, phase="Pending", **kw)


def test_a_created_pod_is_seen_before_the_watch_shows_it_and_dropped_once_it_does() -> None:
    exp = Expectations(clock=Clock())
    exp.created(pod("j-0"))
    assert [p.name for p in exp.apply({})] == ["j-0"]
    assert [p.name for p in exp.apply({"j-0": pod("j-0")})] == ["j-0"]  # the watch confirms it
    assert not exp  # the watch caught up: nothing expected any more


def test_a_deleted_pod_counts_as_deleting_until_it_is_gone() -> None:
    exp = Expectations(clock=Clock())
    exp.deleted("j-0", 0)
    (seen,) = exp.apply({"j-0": pod("j-0")})
    assert seen.deleting
    assert exp.apply({}) == [] and not exp


def test_a_new_attempt_under_the_same_name_ends_the_delete_expectation() -> None:
    exp = Expectations(clock=Clock())
    exp.deleted("j-0", 0)
    (seen,) = exp.apply({"j-0": pod("j-0", attempt=1)})
    assert not seen.deleting and not exp


def test_expectations_time_out_when_the_watch_never_confirms() -> None:
    clock = Clock()
    exp = Expectations(ttl=30, clock=clock)
    exp.created(pod("j-1", rank=1))
    clock.now += 31
    assert exp.apply({}) == [] and not exp


def test_results_are_ordered_by_rank_then_attempt() -> None:
    exp = Expectations(clock=Clock())
    got = exp.apply({"b": pod("b", rank=1), "a": pod("a", rank=0, attempt=1), "c": pod("c", rank=0)})
    assert [(p.node_rank, p.restart_count) for p in got] == [(0, 0), (0, 1), (1, 0)]


def test_a_reconcile_applies_the_expectations_once() -> None:
    """Applying drops the expectations the watch confirmed: a pass sees one view of its Pods
    (what the gang reader, the plan and the progress poller look at is the same)."""
    from tests.operator.test_controller import job_body, make, once, pod

    c, _, _, _ = make(job_body(nodes=2, scheduling={"gang": "volcano"}), [pod(0), pod(1)])
    memory = c._job(("ns", "j"))
    memory.uid = "u1"
    calls = []
    apply = memory.expectations.apply

    def counted(seen: Any) -> Any:
        calls.append(1)
        return apply(seen)

    memory.expectations.apply = counted
    once(c)
    assert calls == [1]
