"""A gang held at Kueue's gate reports its queue's reason (read from the Workload), not the
gate's. Pure: a Workload and Pods as plain data."""

from ddpjob.api.gangs.kueue import GATED, REASON, waiting_reason
from ddpjob.job import lifecycle
from ddpjob.job.decision import GangSaid, Observed
from ddpjob.job.observe import PodState
from tests.job.test_gang_waiting import condition
from tests.job.test_lifecycle import T0

NO_QUOTA = (
    "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor gpu, 2 more needed"
)


def workload(*conditions, queue="team-a"):
    return {
        "spec": {"queueName": queue},
        "status": {"conditions": [{"type": t, "status": s, "reason": r, "message": m} for t, s, r, m in conditions]},
    }


def test_quota_not_reserved_is_the_queues_reason():
    assert waiting_reason(workload(("QuotaReserved", "False", "Pending", NO_QUOTA))) == (
        REASON,
        f"Kueue queue team-a: {NO_QUOTA}",
    )


def test_quota_reserved_but_not_admitted_says_the_admission_condition():
    reason = waiting_reason(
        workload(
            ("QuotaReserved", "True", "QuotaReserved", "ok"),
            ("Admitted", "False", "NoChecks", "waiting for admission checks"),
        )
    )
    assert reason == (REASON, "Kueue queue team-a: waiting for admission checks")


def test_admitted_finished_or_silent_workloads_say_nothing():
    assert waiting_reason(workload(("QuotaReserved", "True", "", ""), ("Admitted", "True", "", ""))) is None
    assert (
        waiting_reason(workload(("QuotaReserved", "False", "Pending", NO_QUOTA), ("Finished", "True", "Succeeded", "")))
        is None
    )
    assert waiting_reason(workload()) is None and waiting_reason(None) is None
    # A condition without a message still says which one and why.
    assert waiting_reason(workload(("QuotaReserved", "False", "Inadmissible", ""))) == (
        REASON,
        "Kueue queue team-a: QuotaReserved=False (Inadmissible)",
    )


def gated(rank):
    return PodState(
        f"demo-{rank}",
        rank,
        0,
        "Pending",
        scheduled=False,
        scheduling_reason="SchedulingGated",
        scheduling_message="Scheduling is blocked due to non-empty scheduling gates",
    )


def test_a_gated_gang_shows_the_queues_reason_in_status_and_condition(job):
    j = job(nodes=2, scheduling={"gang": "kueue", "queue": "team-a"})
    first = lifecycle.plan(j, [], None, T0)
    reason, words = waiting_reason(workload(("QuotaReserved", "False", "Pending", NO_QUOTA)))
    p = lifecycle.decide(
        Observed(
            job=j,
            pods=(gated(0), gated(1)),
            previous=first.status,
            now=T0,
            gang_said=GangSaid(0, GATED, words, reason, replaces=True),
        )
    )
    assert p.status["phase"] == "Pending" and p.status["message"] == f"Scheduled 0/2: Kueue queue team-a: {NO_QUOTA}"
    cond = condition(p.status)
    assert cond["status"] == "False" and cond["reason"] == REASON and NO_QUOTA in cond["message"]
    # Without the Workload's word (not read yet, or not readable) the gate's stays.
    p = lifecycle.decide(Observed(job=j, pods=(gated(0), gated(1)), previous=first.status, now=T0))
    assert (
        p.status["message"].startswith("Scheduled 0/2: Scheduling is blocked")
        and condition(p.status)["reason"] == "SchedulingGated"
    )


def test_the_queues_reason_never_hides_a_schedulers_verdict(job):
    # Admitted and ungated, a Pod the scheduler cannot place reports the scheduler.
    j = job(nodes=2, scheduling={"gang": "kueue", "queue": "team-a"})
    unschedulable = [
        PodState(
            f"demo-{r}",
            r,
            0,
            "Pending",
            scheduled=False,
            scheduling_reason="Unschedulable",
            scheduling_message="0/6 nodes are available",
        )
        for r in (0, 1)
    ]
    p = lifecycle.decide(
        Observed(
            job=j,
            pods=tuple(unschedulable),
            previous=lifecycle.plan(j, [], None, T0).status,
            now=T0,
            gang_said=GangSaid(0, GATED, "Kueue queue team-a: stale", REASON),
        )
    )
    assert condition(p.status)["reason"] == "Unschedulable" and "stale" not in p.status["message"]
