"""The decisions the operator used to take in its glue, now the plan's, each as a pure
function of one `Observed`: refused creates, a blocked gang, batched count writes, the
PodsCreated condition, an invalid spec, and when to take another step."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ddpjob.api.spec import parse_job
from ddpjob.job import lifecycle, scheduling
from ddpjob.job.decision import Observed, Refusal, RefusedCreates
from ddpjob.job.observe import PodState

T0 = datetime(2026, 1, 1, tzinfo=UTC)
QUOTA = Refusal("Pod", "demo-0", "Forbidden", 'pods "demo-0" is forbidden: exceeded quota', 403)
INVALID = Refusal("Pod", "demo-0", "Invalid", 'Pod "demo-0" is invalid: spec.containers[0].image', 422)


def job(**spec):
    spec.setdefault("image", "img")
    spec.setdefault("nodes", 2)
    return parse_job(
        {
            "apiVersion": "ddpjob.io/v1alpha1",
            "kind": "DDPJob",
            "metadata": {"name": "demo", "namespace": "ns", "generation": 1},
            "spec": spec,
        }
    )


def pod(rank: int, phase: str = "Running", **kw) -> PodState:
    return PodState(name=f"demo-{rank}", node_rank=rank, restart_count=0, phase=phase, **kw)


def decide(j=None, pods=(), previous=None, **kw) -> lifecycle.Plan:
    return lifecycle.decide(Observed(job=j or job(), pods=tuple(pods), previous=previous or {}, now=T0, **kw))


def conditions(status: dict) -> dict:
    return {c["type"]: c for c in status.get("conditions", [])}


def test_a_plan_that_creates_leaves_its_status_to_the_step_that_sees_the_pods():
    p = decide()
    assert p.create == (0, 1) and not p.write_status
    later = decide(pods=[pod(0, "Pending"), pod(1, "Pending")], previous={})
    assert later.create == () and later.write_status and later.status["message"] == "0/2 nodes running"


def test_a_fresh_refusal_waits_out_its_backoff_says_why_and_is_reported_once():
    p = decide(refused=RefusedCreates(QUOTA, retry_in=2.0, fresh=True), pods=[pod(0, "Pending")])
    assert p.create == () and p.keep_refusal and p.requeue_after == 2.0
    assert p.status["message"] == f"1/2 Pods created; waiting: {QUOTA.message}"
    assert conditions(p.status)["PodsCreated"]["status"] == "False"
    assert [e.reason for e in p.events] == ["FailedCreatePod"]
    again = decide(refused=RefusedCreates(QUOTA, retry_in=1.0), previous=p.status, pods=[pod(0, "Pending")])
    assert again.events == () and again.requeue_after == 1.0 and not again.plan_again


def test_a_refusal_whose_backoff_is_over_tries_again():
    p = decide(refused=RefusedCreates(QUOTA, retry_in=0.0))
    assert p.create == (0, 1) and p.keep_refusal


def test_an_earlier_deadline_wins_over_the_refusal_backoff():
    st = {"phase": "Pending", "startTime": "2026-01-01T00:00:00Z"}
    p = decide(job(activeDeadlineSeconds=5), refused=RefusedCreates(QUOTA, retry_in=30.0), previous=st)
    assert p.requeue_after == 6.0  # the deadline (from the end of startTime's second)


def test_an_invalid_rendered_pod_fails_the_job_for_good():
    p = decide(refused=RefusedCreates(INVALID, retry_in=1.0, fresh=True))
    assert p.status["phase"] == "Failed" and INVALID.message in p.status["message"]
    assert [e.reason for e in p.events] == ["FailedCreatePod", "Failed"]
    assert conditions(p.status)["PodsCreated"]["reason"] == "Invalid"
    assert p.plan_again and not p.keep_refusal and p.create == ()


def test_a_namespace_being_deleted_is_not_reported():
    silent = Refusal("Pod", "demo-0", "Forbidden", "namespace is terminating", 403, ("NamespaceTerminating",))
    p = decide(refused=RefusedCreates(silent, retry_in=1.0, fresh=True))
    assert p.events == () and p.keep_refusal


def test_once_the_creates_go_through_pods_created_flips_back():
    refused = decide(refused=RefusedCreates(QUOTA, retry_in=1.0)).status
    p = decide(pods=[pod(0, "Pending"), pod(1, "Pending")], previous=refused)
    cond = conditions(p.status)["PodsCreated"]
    assert (cond["status"], cond["reason"]) == ("True", "Created") and not p.keep_refusal


def test_a_blocked_gang_waits_with_growing_backoff_and_one_event():
    j = job(scheduling={"gang": "volcano"})
    why = (scheduling.UNAVAILABLE, "spec.scheduling.gang=volcano is not enabled in this operator")
    first = decide(j, gang_blocked=why, gang_waits=0)
    assert first.create == () and first.gang_blocked and first.check_gang_apis
    assert first.status["message"] == why[1] and [e.reason for e in first.events] == [scheduling.UNAVAILABLE]
    cond = conditions(first.status)[scheduling.CONDITION]
    assert (cond["status"], cond["reason"]) == ("False", scheduling.UNAVAILABLE)
    second = decide(j, previous=first.status, gang_blocked=why, gang_waits=1, jitter=0.99)
    assert second.events == () and not second.check_gang_apis
    assert first.requeue_after == 2.0 and 4.0 <= second.requeue_after < 5.0
    assert decide(j, previous=first.status, gang_blocked=why, gang_waits=4).check_gang_apis


def test_a_pod_group_still_going_away_is_no_reason_to_ask_discovery():
    p = decide(job(scheduling={"gang": "kubernetes"}), gang_blocked=("PodGroupTerminating", "waiting"))
    assert p.gang_blocked and not p.check_gang_apis


def test_counts_alone_wait_for_the_batch_interval_but_a_phase_change_does_not():
    st = decide(job(nodes=4), pods=[pod(r, "Pending") for r in range(4)]).status
    pods = [pod(0), pod(1), pod(2, "Pending"), pod(3, "Pending")]
    held = decide(job(nodes=4), pods=pods, previous=st, since_last_write=0.05)
    assert held.status == st and held.requeue_after == pytest.approx(0.15)
    assert decide(job(nodes=4), pods=pods, previous=st, since_last_write=1.0).status["readyNodes"] == 2
    running = decide(job(nodes=4), pods=[pod(r) for r in range(4)], previous=st, since_last_write=0.01)
    assert running.status["phase"] == "Running" and running.plan_again


def test_an_invalid_spec_fails_once_and_stops_what_runs():
    p = lifecycle.decide(
        Observed(
            job=None,
            pods=(pod(0), pod(1, "Succeeded")),
            previous={},
            now=T0,
            errors=("spec.nodes: must be >= 1 (got 0)",),
            generation=3,
        )
    )
    assert p.status["phase"] == "Failed" and p.status["observedGeneration"] == 3
    assert p.delete == ("demo-0",) and [e.reason for e in p.events] == ["InvalidSpec"]
    again = lifecycle.decide(
        Observed(job=None, pods=(), previous=p.status, now=T0, errors=("spec.nodes: must be >= 1 (got 0)",))
    )
    assert again.status == p.status and again.events == ()


def test_a_success_is_not_rewritten_by_a_later_bad_edit():
    done = {"phase": "Succeeded", "message": "all 2 nodes finished successfully"}
    p = lifecycle.decide(Observed(job=None, pods=(), previous=done, now=T0, errors=("spec.image: required",)))
    assert p.status == done and p.events == () and p.delete == ()


def test_restart_and_failure_events_name_the_failed_pod():
    st = {"phase": "Running", "restarts": 0, "startTime": "2026-01-01T00:00:00Z"}
    evicted = pod(1, "Failed", reason="Evicted", message="The node was low on memory.")
    p = decide(job(restartBackoffSeconds=0), pods=[pod(0), evicted], previous=st)
    [restarting] = [e for e in p.events if e.reason == "Restarting"]
    assert "(pod demo-1, exit code none)" in restarting.message


def running(j) -> dict:
    """The status of `j` once its whole gang ran."""
    pending = decide(j, pods=[pod(0, "Pending"), pod(1, "Pending")]).status
    return decide(j, pods=[pod(0), pod(1)], previous=pending).status


@pytest.mark.parametrize(
    ("seen", "phase", "reason", "disruptions"),
    [
        # This operator saw demo-1 and it vanished unmarked: someone deleted it; charged.
        (frozenset({"demo-0", "demo-1"}), "Failed", "PodDeleted", None),
        (None, "Failed", "PodDeleted", None),  # not tracked: as if seen
        # Never seen: it went while no operator watched (a failover); not charged.
        (frozenset({"demo-0"}), "Restarting", "PodGone", 1),
    ],
)
def test_a_member_gone_while_no_operator_watched_is_not_charged(seen, phase, reason, disruptions):
    j = job(restartPolicy="OnFailure", maxRestarts=0)
    p = decide(j, pods=[pod(0)], previous=running(j), seen=seen)
    assert p.status["phase"] == phase and p.status["lastFailure"]["reason"] == reason
    assert p.status["lastFailure"]["pod"] == "demo-1" and p.status.get("disruptions") == disruptions
    if phase == "Restarting":
        assert p.status["restarts"] == 1 and "not counted against maxRestarts=0" in p.status["message"]
        assert "while no operator was watching" in p.status["lastFailure"]["message"]
