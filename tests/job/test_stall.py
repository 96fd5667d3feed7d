"""Stall detection in the shared job logic: a gang whose progress record stops advancing
while every Pod runs is restarted with reason Stalled, naming the ranks that stopped."""

from datetime import UTC, datetime, timedelta

import pytest

from ddpjob.api.spec import parse_job
from ddpjob.job import lifecycle, stall
from ddpjob.job.observe import PodState

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
RECORD = {
    "step": 40,
    "total_steps": 100,
    "epoch": 1,
    "total_epochs": 3,
    "samples_per_s": 900.0,
    "loss": 0.3,
    "time": T0.timestamp(),
}


def pods(phases, attempt=0):
    return [PodState(name=f"demo-{i}", node_rank=i, restart_count=attempt, phase=ph) for i, ph in enumerate(phases)]


def progress(since, attempt=0, record=RECORD, ranks=None):
    return stall.ProgressState(
        restart_count=attempt,
        seconds_since_progress=since,
        record=record,
        eta_seconds=80,
        ranks=ranks if ranks is not None else {0: {"step": 41}, 1: {"step": 40}},
    )


@pytest.fixture
def job(job_body):
    def make(**spec):
        return parse_job(job_body(**{"restartBackoffSeconds": 10, **spec}))

    return make


def running(j):
    first = lifecycle.plan(j, [], None, T0)
    return lifecycle.plan(j, pods(["Running", "Running"]), first.status, T0).status


def test_progress_lands_in_status_and_is_stable_while_the_record_is(job):
    j = job(stallTimeoutSeconds=60)
    st = running(j)
    p = lifecycle.plan(j, pods(["Running", "Running"]), st, T0, progress(5))
    assert p.status["progress"] == {
        "step": 40,
        "totalSteps": 100,
        "epoch": 1,
        "totalEpochs": 3,
        "samplesPerSecond": 900.0,
        "loss": 0.3,
        "etaSeconds": 80,
        "eta": "1m20s",
        "summary": "epoch 1/3 step 40/100 (40%)",
        "attempt": 0,
        "updateTime": "2026-01-01T12:00:00Z",
    }
    later = lifecycle.plan(j, pods(["Running", "Running"]), p.status, T0 + timedelta(seconds=30), progress(35))
    assert later.status == p.status and later.events == ()  # nothing new: nothing to write


def test_no_advance_for_the_timeout_restarts_the_gang_as_stalled(job):
    j = job(stallTimeoutSeconds=60, maxRestarts=2)
    st = running(j)
    assert lifecycle.plan(j, pods(["Running", "Running"]), st, T0, progress(59)).status["phase"] == "Running"
    p = lifecycle.plan(j, pods(["Running", "Running"]), st, T0, progress(61))
    assert p.status["phase"] == "Restarting" and p.restart_count == 1
    assert set(p.delete) == {"demo-0", "demo-1"}
    failure = p.status["lastFailure"]
    assert failure["reason"] == "Stalled" and failure["retryable"] and "exitCode" not in failure
    cond = {c["type"]: c for c in p.status["conditions"]}["Stalled"]
    assert (
        cond["status"] == "True" and "rank(s) 1 stopped at step 40 while the others reached step 41" in cond["message"]
    )
    assert [e.reason for e in p.events] == ["Stalled", "Restarting"]
    assert "stallTimeoutSeconds=60" in p.events[0].message and "epoch 1/3 step 40/100" in p.events[0].message


def test_stalled_condition_clears_once_the_next_attempt_advances(job):
    j = job(stallTimeoutSeconds=60, restartBackoffSeconds=0)
    p = lifecycle.plan(j, pods(["Running", "Running"]), running(j), T0, progress(61))
    st = lifecycle.plan(j, [], p.status, T0).status
    st = lifecycle.plan(j, pods(["Running", "Running"], attempt=1), st, T0).status
    assert st["phase"] == "Running"
    assert {c["type"]: c["status"] for c in st["conditions"]}["Stalled"] == "True"  # nothing read yet
    st = lifecycle.plan(j, pods(["Running", "Running"], attempt=1), st, T0, progress(1, attempt=1)).status
    assert {c["type"]: c["status"] for c in st["conditions"]}["Stalled"] == "False"


@pytest.mark.parametrize(
    "why, spec, observed, state",
    [
        ("off by default", {}, ["Running", "Running"], progress(10_000)),
        ("not every Pod runs", {"stallTimeoutSeconds": 60}, ["Running", "Succeeded"], progress(10_000)),
        (
            "an earlier attempt's launcher",
            {"stallTimeoutSeconds": 60},
            ["Running", "Running"],
            progress(10_000, attempt=7),
        ),
        ("nothing read", {"stallTimeoutSeconds": 60}, ["Running", "Running"], None),
        (
            "no record yet: still starting",
            {"stallTimeoutSeconds": 60},
            ["Running", "Running"],
            progress(10_000, record=None),
        ),
    ],
)
def test_no_stall(job, why, spec, observed, state):
    j = job(**spec)
    p = lifecycle.plan(j, pods(observed), running(j), T0, state)
    assert p.status["phase"] == "Running" and not p.delete, why


def test_never_policy_fails_on_a_stall(job):
    j = job(stallTimeoutSeconds=60, restartPolicy="Never")
    p = lifecycle.plan(j, pods(["Running", "Running"]), running(j), T0, progress(61))
    assert p.status["phase"] == "Failed" and p.status["lastFailure"]["reason"] == "Stalled"
    assert [e.reason for e in p.events] == ["Stalled", "Failed"]


@pytest.mark.parametrize(
    "ranks, world, text",
    [
        ({0: {"step": 5}, 1: {"step": 4}, 2: {"step": 5}, 3: {"step": 4}}, 4, "rank(s) 1,3 stopped at step 4"),
        (
            {0: {"step": 5}, 1: {"step": 5}},
            4,
            "all reporting ranks (0-1) stopped at step 5; no heartbeat seen from rank(s) 2-3",
        ),
        ({}, 2, "no rank reported a heartbeat"),
    ],
)
def test_stale_ranks(ranks, world, text):
    assert text in stall.stale_ranks(stall.ProgressState(0, 100.0, ranks=ranks), world)[1]


def test_a_job_that_is_not_running_shows_where_it_got_to_but_no_eta(job):
    j = job(stallTimeoutSeconds=60)
    st = lifecycle.plan(j, pods(["Running", "Running"]), running(j), T0, progress(5)).status
    assert st["progress"]["eta"] == "1m20s"
    done = lifecycle.plan(j, pods(["Succeeded", "Succeeded"]), st, T0 + timedelta(seconds=5)).status
    assert done["phase"] == "Succeeded" and done["progress"]["step"] == 40
    assert "eta" not in done["progress"] and "etaSeconds" not in done["progress"]
    # Marked final, and the PROGRESS column says it is the last record read, not where it ended.
    assert done["progress"]["final"] is True
    assert done["progress"]["summary"] == "done (last read: epoch 1/3 step 40/100 (40%))"
    again = lifecycle.plan(j, pods(["Succeeded", "Succeeded"]), done, T0 + timedelta(seconds=9)).status
    assert again["progress"] == done["progress"]  # stable: nothing more to write
    whole = {"step": 100, "totalSteps": 100, "summary": "step 100/100 (100%)", "attempt": 0}
    complete = lifecycle.plan(j, pods(["Succeeded", "Succeeded"]), {**st, "progress": whole}, T0).status
    assert complete["progress"]["summary"] == "step 100/100 (100%)"  # read at the end: nothing to qualify
    paused = lifecycle.plan(
        job(stallTimeoutSeconds=60, suspend=True), pods(["Running", "Running"]), st, T0 + timedelta(seconds=5)
    ).status
    assert paused["phase"] == "Suspended" and paused["progress"]["step"] == 40 and "eta" not in paused["progress"]
    assert paused["progress"]["summary"] == "last read: epoch 1/3 step 40/100 (40%)"
    assert "final" not in st["progress"]  # a running job's record is not final


def test_progress_belongs_to_its_attempt_and_a_new_attempt_or_a_resume_starts_empty(job):
    j = job(stallTimeoutSeconds=60)
    st = lifecycle.plan(j, pods(["Running", "Running"]), running(j), T0, progress(5)).status
    assert st["progress"]["attempt"] == 0
    # A gang restart: attempt 0's record is not the new attempt's progress.
    failed = [
        PodState(name="demo-0", node_rank=0, restart_count=0, phase="Running"),
        PodState(name="demo-1", node_rank=1, restart_count=0, phase="Failed", exit_code=1, reason="Error"),
    ]
    restarting = lifecycle.plan(j, failed, st, T0 + timedelta(seconds=10), progress(5)).status
    assert restarting["phase"] == "Restarting" and restarting["restarts"] == 1
    assert "progress" not in restarting
    # Attempt 0's Pod 0 still answering (a late poll) changes nothing.
    late = lifecycle.plan(j, failed, restarting, T0 + timedelta(seconds=11), progress(1, attempt=0)).status
    assert "progress" not in late
    up = lifecycle.plan(j, pods(["Running", "Running"], attempt=1), late, T0 + timedelta(seconds=30)).status
    assert up["phase"] == "Running" and "progress" not in up
    mine = lifecycle.plan(
        j, pods(["Running", "Running"], attempt=1), up, T0 + timedelta(seconds=31), progress(1, attempt=1)
    ).status
    assert mine["progress"]["attempt"] == 1 and mine["progress"]["eta"] == "1m20s"
    # Suspended keeps where it got to (no ETA); the resume starts without it.
    suspended = job(stallTimeoutSeconds=60, suspend=True)
    paused = lifecycle.plan(suspended, pods(["Running", "Running"], attempt=1), mine, T0 + timedelta(seconds=40)).status
    assert paused["progress"]["step"] == 40 and "eta" not in paused["progress"]
    resumed = lifecycle.plan(j, [], paused, T0 + timedelta(seconds=50)).status
    assert resumed["phase"] == "Pending" and "progress" not in resumed


@pytest.mark.parametrize(
    "record",
    [
        {**RECORD, "step": 100},  # the last step done: evaluating, saving, tearing down
        {**RECORD, "step": 100, "stage": "saving"},
        {"step": 7, "stage": "exiting"},  # no total known: the trainer says so
    ],
)
def test_a_job_past_its_last_step_is_never_stalled(job, record):
    j = job(stallTimeoutSeconds=10)
    st = running(j)
    p = lifecycle.plan(j, pods(["Running", "Running"]), st, T0, progress(3600, record=record))
    assert p.status["phase"] == "Running" and p.delete == () and p.events == ()
    assert "Stalled" not in {c["type"] for c in p.status["conditions"]}


def test_evaluating_or_saving_between_epochs_still_counts(job):
    j = job(stallTimeoutSeconds=10)
    record = {**RECORD, "stage": "evaluating"}  # step 40 of 100: training is not over
    p = lifecycle.plan(j, pods(["Running", "Running"]), running(j), T0, progress(11, record=record))
    assert p.status["phase"] == "Restarting" and p.status["lastFailure"]["reason"] == "Stalled"


def test_a_short_job_keeps_the_record_its_pod_0_left_when_it_succeeded(job):
    """Records are read every 30 s: a job may end between two reads, or before the first.
    Pod 0's launcher leaves the last record as its termination message."""
    import dataclasses
    import json

    j = job()
    st = running(j)  # no progress was ever read
    last = {
        "step": 100,
        "total_steps": 100,
        "epoch": 3,
        "total_epochs": 3,
        "loss": 0.1,
        "time": T0.timestamp(),
        "stage": "exiting",
    }
    done = [
        PodState(name="demo-0", node_rank=0, restart_count=0, phase="Succeeded", exit_code=0, message=json.dumps(last)),
        PodState(name="demo-1", node_rank=1, restart_count=0, phase="Succeeded", exit_code=0),
    ]
    p = lifecycle.plan(j, done, st, T0)
    assert p.status["phase"] == "Succeeded"
    assert p.status["progress"] == {
        "step": 100,
        "totalSteps": 100,
        "epoch": 3,
        "totalEpochs": 3,
        "loss": 0.1,
        "summary": "epoch 3/3 step 100/100 (100%)",
        "attempt": 0,
        "final": True,
        "updateTime": "2026-01-01T12:00:00Z",
    }
    # Anything else a Pod says is no record: the last one read stays.
    for message in ("done", '{"step": "x"}', "{" * 10):
        other = lifecycle.plan(j, [dataclasses.replace(done[0], message=message), done[1]], st, T0)
        assert "progress" not in other.status
