"""Waiting to be placed is reported, never failed; preemptions and evictions restart the
gang without using up maxRestarts. Pure job logic, observed Pods as plain data."""

from datetime import timedelta

import pytest

from ddpjob.job.failure import failure_record
from ddpjob.job.observe import PodState, pod_state
from tests.job.test_lifecycle import T0, pods, running_status, step

UNSCHEDULABLE = "0/6 nodes are available: 6 Insufficient nvidia.com/gpu."


def waiting_pods(n_scheduled, n, attempt=0, reason="Unschedulable", message=UNSCHEDULABLE):
    return [
        PodState(
            name=f"demo-{i}",
            node_rank=i,
            restart_count=attempt,
            phase="Running" if i < n_scheduled else "Pending",
            scheduled=i < n_scheduled,
            scheduling_reason=None if i < n_scheduled else reason,
            scheduling_message=None if i < n_scheduled else message,
        )
        for i in range(n)
    ]


def condition(status, ctype="GangScheduled"):
    return next((c for c in status.get("conditions", []) if c["type"] == ctype), None)


def test_unscheduled_pods_are_reported_not_failed(job):
    j = job(nodes=8, scheduling={"gang": "kubernetes"})
    p = step(j, [], None)
    for minute in range(1, 30):  # half an hour of waiting changes nothing but the report
        p = step(j, waiting_pods(6, 8), p.status, T0 + timedelta(minutes=minute))
        assert p.status["phase"] == "Pending" and p.delete == () and p.create == ()
    assert p.status["restarts"] == 0 and "lastFailure" not in p.status
    assert p.status["scheduledNodes"] == 6
    assert p.status["message"] == f"Scheduled 6/8: {UNSCHEDULABLE}"
    cond = condition(p.status)
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable"
    assert cond["lastTransitionTime"] == "2026-01-01T12:01:00Z"  # the wait started then
    p = step(j, waiting_pods(8, 8), p.status, T0 + timedelta(minutes=31))
    assert p.status["phase"] == "Running" and condition(p.status)["status"] == "True"
    assert condition(p.status)["message"] == "Scheduled 8/8"


def test_gated_pods_report_the_gate(job):
    j = job(nodes=2, scheduling={"gang": "kueue", "queue": "q"})
    body = {
        "metadata": {"name": "demo-0", "labels": {"ddpjob.io/node-rank": "0", "ddpjob.io/restart-count": "0"}},
        "spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]},
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "SchedulingGated",
                    "message": "Scheduling is blocked due to non-empty scheduling gates",
                }
            ],
        },
    }
    gated = pod_state(body)
    assert not gated.scheduled and gated.scheduling_reason == "SchedulingGated"
    p = step(
        j,
        [gated, PodState("demo-1", 1, 0, "Pending", scheduled=False, scheduling_reason="SchedulingGated")],
        step(j, [], None).status,
    )
    assert p.status["message"].startswith("Scheduled 0/2: Scheduling is blocked")
    assert condition(p.status)["reason"] == "SchedulingGated"


def test_pod_state_reads_scheduling():
    base = {"metadata": {"name": "demo-0", "labels": {"ddpjob.io/node-rank": "0", "ddpjob.io/restart-count": "0"}}}
    assert pod_state({**base, "status": {"phase": "Pending"}, "spec": {"nodeName": "gpu-1"}}).scheduled
    held = pod_state({**base, "status": {"phase": "Pending"}, "spec": {}})
    assert not held.scheduled and held.scheduling_reason == "Pending"  # a gang scheduler's PreEnqueue
    gated = pod_state({**base, "status": {"phase": "Pending"}, "spec": {"schedulingGates": [{"name": "g"}]}})
    assert gated.scheduling_reason == "SchedulingGated" and "g" in gated.scheduling_message


def test_schedule_timeout_reports_once_and_keeps_waiting(job):
    j = job(nodes=4, scheduling={"gang": "volcano", "scheduleTimeoutSeconds": 600})
    p = step(j, [], None)
    p = step(j, waiting_pods(2, 4), p.status, T0 + timedelta(seconds=1))
    assert p.requeue_after == pytest.approx(600)  # wakes up when the timeout is due
    p = step(j, waiting_pods(2, 4), p.status, T0 + timedelta(seconds=601))
    assert p.status["phase"] == "Pending" and p.delete == ()
    assert [e.reason for e in p.events] == ["ScheduleTimeout"]
    assert condition(p.status)["reason"] == "ScheduleTimeout"
    assert "scheduleTimeoutSeconds=600" in condition(p.status)["message"]
    p = step(j, waiting_pods(2, 4), p.status, T0 + timedelta(seconds=700))
    assert p.events == () and p.status["phase"] == "Pending"  # reported once


def test_schedule_timeout_fails_when_asked(job):
    j = job(nodes=4, scheduling={"gang": "coscheduling", "scheduleTimeoutSeconds": 60, "onScheduleTimeout": "Fail"})
    p = step(j, [], None)
    p = step(j, waiting_pods(3, 4), p.status, T0 + timedelta(seconds=1))
    p = step(j, waiting_pods(3, 4), p.status, T0 + timedelta(seconds=62))
    assert p.status["phase"] == "Failed" and condition(p.status, "Failed")["reason"] == "ScheduleTimeout"
    assert set(p.delete) == {"demo-0", "demo-1", "demo-2", "demo-3"}


def test_each_attempt_waits_on_its_own_clock(job):
    j = job(nodes=2, scheduling={"gang": "kubernetes", "scheduleTimeoutSeconds": 60})
    p = step(j, [], None)
    p = step(j, waiting_pods(2, 2), p.status)
    assert condition(p.status)["status"] == "True"
    p = step(j, waiting_pods(0, 2, attempt=0), p.status, T0 + timedelta(seconds=500))
    assert condition(p.status)["lastTransitionTime"] == "2026-01-01T12:08:20Z" and p.events == ()


def test_gang_none_adds_the_condition_only_after_a_wait(job):
    j = job()
    p = step(j, [], None)
    p = step(j, pods(["Running", "Running"]), p.status)
    assert condition(p.status) is None
    p = step(job(), [], None)
    p = step(j, waiting_pods(1, 2), p.status)
    assert condition(p.status)["status"] == "False"


@pytest.mark.parametrize(
    "disruption",
    ["PreemptionByScheduler", "EvictionByEvictionAPI", "WorkloadEvictedDueToPreempted", "Evict", "Evicted"],
)
def test_preemption_restarts_do_not_use_up_max_restarts(job, disruption):
    j = job(maxRestarts=1)
    status = running_status(j)
    for attempt in range(5):  # five preemptions in a row, maxRestarts=1
        observed = pods(
            ["Running", "Running"], attempt=attempt, extra={0: {"deleting": True, "disruption": disruption}}
        )
        p = step(j, observed, status, T0 + timedelta(minutes=10 * attempt + 1))
        assert p.status["phase"] == "Restarting", p.status["message"]
        assert p.status["restarts"] == attempt + 1 and p.status["disruptions"] == attempt + 1
        assert "not counted against maxRestarts=1" in p.status["message"]
        status = {**p.status, "phase": "Running"}
    # an ordinary failure still has its one restart, then the job fails
    p = step(j, pods(["Failed", "Running"], attempt=5, extra={0: {"exit_code": 1}}), status, T0 + timedelta(hours=2))
    assert p.status["phase"] == "Restarting" and "(1/1)" in p.status["message"]
    status = {**p.status, "phase": "Running"}
    p = step(j, pods(["Failed", "Running"], attempt=6, extra={0: {"exit_code": 1}}), status, T0 + timedelta(hours=3))
    assert p.status["phase"] == "Failed" and "maxRestarts=1 reached" in p.status["message"]


def test_a_preempted_member_explains_its_peers_failure(job):
    """The peers exit 1 (broken rendezvous) before the preempted Pod is gone: still a disruption."""
    j = job(restartPolicy="ExitCode", maxRestarts=0)
    observed = pods(
        ["Failed", "Running"],
        extra={
            0: {"exit_code": 1, "finished_at": "2026-01-01T12:00:01Z"},
            1: {"deleting": True, "disruption": "PreemptionByScheduler", "message": "preempted"},
        },
    )
    p = step(j, observed, running_status(j))
    assert p.status["phase"] == "Restarting"
    assert p.status["lastFailure"]["pod"] == "demo-1" and p.status["lastFailure"]["reason"] == "PreemptionByScheduler"


def test_never_means_never_even_for_a_preemption(job):
    j = job(restartPolicy="Never")
    p = step(
        j,
        pods(["Running", "Running"], extra={0: {"deleting": True, "disruption": "PreemptionByScheduler"}}),
        running_status(j),
    )
    assert p.status["phase"] == "Failed"


@pytest.mark.parametrize(
    "status, expected",
    [
        (
            {
                "conditions": [
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "reason": "PreemptionByScheduler",
                        "message": "preempted by a higher priority pod",
                    }
                ]
            },
            "PreemptionByScheduler",
        ),
        (
            {
                "conditions": [
                    {
                        "type": "TerminationTarget",
                        "status": "True",
                        "reason": "WorkloadEvictedDueToPreempted",
                        "message": "Preempted to accommodate a higher priority Workload",
                    }
                ]
            },
            "WorkloadEvictedDueToPreempted",
        ),
        (
            {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "False",
                        "reason": "Evict",
                        "message": "Pod is evicted, because of preempt",
                    }
                ]
            },
            "Evict",
        ),
        ({"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."}, "Evicted"),
        ({"conditions": [{"type": "DisruptionTarget", "status": "False", "reason": "PreemptionByScheduler"}]}, None),
        ({"conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}]}, None),
    ],
)
def test_pod_state_reads_disruptions(status, expected):
    body = {
        "metadata": {"name": "demo-0", "labels": {"ddpjob.io/node-rank": "0", "ddpjob.io/restart-count": "0"}},
        "status": {"phase": "Running", **status},
    }
    state = pod_state(body)
    assert state.disruption == expected
    if expected:
        assert state.message


@pytest.mark.parametrize(
    "condition, reason, message",
    [
        (
            {"type": "Ready", "status": "False", "reason": "Evict", "message": "Pod is evicted, because of preempt"},
            "Evict",
            "Pod is evicted, because of preempt",
        ),
        (
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "PreemptionByScheduler",
                "message": "preempted by a higher priority pod",
            },
            "PreemptionByScheduler",
            "preempted by a higher priority pod",
        ),
    ],
)
def test_a_disrupted_pods_killed_container_does_not_hide_why(condition, reason, message):
    """The eviction's SIGTERM ends the container with exit 143, reason Error and its log
    tail as the message; whether the operator sees that or the still-running Pod is a
    race (seen on the real Volcano): either way the failure is the disruption."""
    body = {
        "metadata": {"name": "demo-2", "labels": {"ddpjob.io/node-rank": "2", "ddpjob.io/restart-count": "0"}},
        "status": {
            "phase": "Failed",
            "conditions": [condition],
            "containerStatuses": [
                {"name": "trainer", "state": {"terminated": {"exitCode": 143, "reason": "Error", "message": "node 2"}}}
            ],
        },
    }
    state = pod_state(body)
    assert (state.disruption, state.reason, state.message, state.exit_code) == (reason, reason, message, 143)
    record = failure_record(state, "OnFailure", T0)
    assert (record["reason"], record["message"]) == (reason, message)


def test_backoff_after_a_preemption_says_what_counts(job):
    j = job(maxRestarts=1)
    p = step(
        j,
        pods(["Running", "Running"], extra={0: {"deleting": True, "disruption": "PreemptionByScheduler"}}),
        running_status(j),
    )
    p = step(j, [], p.status, T0 + timedelta(seconds=1))
    assert p.status["phase"] == "Restarting"
    assert p.status["message"].endswith("; backing off before restart 1 (0/1 counted)"), p.status["message"]
