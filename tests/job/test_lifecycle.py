"""The shared job logic, step by step, with observed Pods as plain data."""

from datetime import UTC, datetime, timedelta

import pytest

from ddpjob.job import lifecycle
from ddpjob.job.decision import Observed
from ddpjob.job.observe import PodState, pod_state
from ddpjob.job.restart_policy import backoff_seconds, is_retryable

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def pods(phases, attempt=0, extra=None):
    extra = extra or {}
    return [
        PodState(name=f"demo-{i}", node_rank=i, restart_count=attempt, phase=ph, **extra.get(i, {}))
        for i, ph in enumerate(phases)
    ]


def step(job, observed, status, at=T0):
    return lifecycle.plan(job, observed, status, at)


def test_happy_path_pending_running_succeeded(job):
    j = job()
    p = step(j, [], None)
    assert p.create == (0, 1) and p.status["phase"] == "Pending" and p.restart_count == 0
    assert p.status["startTime"] == "2026-01-01T12:00:00Z" and p.status["observedGeneration"] == 1
    p = step(j, pods(["Pending", "Running"]), p.status)
    assert p.create == () and p.status["phase"] == "Pending" and p.status["readyNodes"] == 1
    p = step(j, pods(["Running", "Running"]), p.status, T0 + timedelta(seconds=5))
    assert p.status["phase"] == "Running" and p.status["readyNodes"] == 2
    assert [e.reason for e in p.events] == ["Running"]
    running = {c["type"]: c for c in p.status["conditions"]}["Running"]
    assert running["status"] == "True" and running["lastTransitionTime"] == "2026-01-01T12:00:05Z"
    again = step(j, pods(["Running", "Running"]), p.status, T0 + timedelta(seconds=9))
    assert again.status == p.status and again.events == ()  # nothing to write, nothing to say
    p = step(j, pods(["Succeeded", "Running"]), p.status)
    assert p.status["phase"] == "Running"
    p = step(j, pods(["Succeeded", "Succeeded"]), p.status, T0 + timedelta(seconds=60))
    assert p.status["phase"] == "Succeeded" and p.status["completionTime"] == "2026-01-01T12:01:00Z"
    conds = {c["type"]: c["status"] for c in p.status["conditions"]}
    assert conds == {"Running": "False", "Succeeded": "True"}
    assert p.delete == () and not p.delete_job


def running_status(j):
    return step(j, pods(["Running", "Running"]), step(j, [], None).status).status


def test_on_failure_restarts_the_whole_gang_after_backoff(job):
    j = job(restartPolicy="OnFailure", maxRestarts=2)
    st = running_status(j)
    p = step(j, pods(["Failed", "Running"], extra={0: {"exit_code": 1, "reason": "Error"}}), st)
    assert p.status["phase"] == "Restarting" and p.status["restarts"] == 1
    assert set(p.delete) == {"demo-0", "demo-1"} and p.create == ()
    assert p.status["lastFailure"]["pod"] == "demo-0" and p.status["lastFailure"]["exitCode"] == 1
    assert p.requeue_after == 10 and p.events[0].type == "Warning" and "demo-0" in p.events[0].message
    # Old Pods still there (terminating): wait, do not create over their names.
    p2 = step(j, pods(["Failed", "Running"], extra={1: {"deleting": True}}), p.status, T0 + timedelta(seconds=1))
    assert p2.create == () and p2.delete == ("demo-0",)
    # Gone, but backoff not over.
    p3 = step(j, [], p2.status, T0 + timedelta(seconds=5))
    assert p3.create == () and p3.requeue_after == pytest.approx(5)
    # What `--wait` and `kubectl get ddpj -w` show meanwhile says why it restarts.
    assert p3.status["message"] == "Pod demo-0 failed (exit code 1, Error); backing off before restart 1/2"
    p4 = step(j, [], p3.status, T0 + timedelta(seconds=10))
    assert p4.create == (0, 1) and p4.restart_count == 1 and p4.status["phase"] == "Restarting"
    p5 = step(j, pods(["Running", "Running"], attempt=1), p4.status, T0 + timedelta(seconds=12))
    assert p5.status["phase"] == "Running"
    p6 = step(j, pods(["Succeeded", "Succeeded"], attempt=1), p5.status)
    assert p6.status["phase"] == "Succeeded" and p6.status["restarts"] == 1


def test_backoff_doubles_and_is_capped():
    assert [backoff_seconds(10, n) for n in (0, 1, 2, 3, 6, 20)] == [0, 10, 20, 40, 300, 300]
    assert backoff_seconds(0, 5) == 0


def test_max_restarts_is_honoured(job):
    j = job(maxRestarts=1)
    st = running_status(j)
    p = step(j, pods(["Failed", "Running"], extra={0: {"exit_code": 143}}), st)
    assert p.status["restarts"] == 1
    st = step(j, pods(["Running", "Running"], attempt=1), {**p.status, "phase": "Running"}).status
    p = step(j, pods(["Running", "Failed"], attempt=1, extra={1: {"exit_code": 143}}), st)
    assert p.status["phase"] == "Failed" and p.status["restarts"] == 1
    assert "maxRestarts=1" in p.status["message"] and p.delete == ("demo-0",)
    assert {c["type"]: c["reason"] for c in p.status["conditions"]}["Failed"] == "BackoffLimitExceeded"
    assert p.status["lastFailure"]["pod"] == "demo-1" and p.status["lastFailure"]["exitCode"] == 143


@pytest.mark.parametrize(
    "code, retry",
    [(1, False), (2, False), (127, False), (128, True), (137, True), (143, True), (255, True), (None, True)],
)
def test_exit_code_policy(job, code, retry):
    j = job(restartPolicy="ExitCode")
    extra = {"exit_code": code} if code is not None else {"reason": "Evicted"}
    p = step(j, pods(["Failed", "Running"], extra={0: extra}), running_status(j))
    assert p.status["phase"] == ("Restarting" if retry else "Failed")
    assert is_retryable("ExitCode", code) is retry


def test_never_policy_fails_at_once(job):
    j = job(restartPolicy="Never")
    p = step(j, pods(["Failed", "Running"], extra={0: {"exit_code": 137}}), running_status(j))
    assert p.status["phase"] == "Failed" and p.status["restarts"] == 0
    assert {c["type"]: c["reason"] for c in p.status["conditions"]}["Failed"] == "PodFailed"


def test_root_cause_is_the_first_failure_not_the_peers_that_followed(job):
    j = job(restartPolicy="ExitCode")
    observed = pods(
        ["Failed", "Failed"],
        extra={
            0: {"exit_code": 1, "finished_at": "2026-01-01T12:00:09Z"},  # rendezvous broke: a follower
            1: {"exit_code": 137, "finished_at": "2026-01-01T12:00:08Z"},  # OOM-killed first: the cause
        },
    )
    p = step(j, observed, running_status(j))
    assert p.status["phase"] == "Restarting" and p.status["lastFailure"]["pod"] == "demo-1"
    # In the same second (finishedAt's resolution), the program's own error over the
    # broken connection it left its peer.
    observed = pods(
        ["Failed", "Failed"],
        extra={
            0: {
                "exit_code": 1,
                "finished_at": "2026-01-01T12:00:09Z",
                "message": "[rank0]: RuntimeError: Connection closed by peer [10.0.0.2]:4319",
            },
            1: {"exit_code": 1, "finished_at": "2026-01-01T12:00:09Z", "message": "[rank1]: ValueError: bad shard"},
        },
    )
    p = step(job(), observed, running_status(j))
    assert p.status["lastFailure"]["errorLine"] == "[rank1]: ValueError: bad shard"


def test_a_pod_deleted_by_hand_breaks_the_gang(job):
    j = job()
    st = running_status(j)
    p = step(j, pods(["Running"]), st)  # demo-1 vanished
    assert p.status["phase"] == "Restarting" and p.status["lastFailure"]["reason"] == "PodDeleted"
    assert p.status["lastFailure"]["pod"] == "demo-1"
    p = step(j, pods(["Running", "Running"], extra={1: {"deleting": True}}), st)
    assert p.status["phase"] == "Restarting" and p.status["lastFailure"]["pod"] == "demo-1"


def test_missing_pod_before_the_gang_ran_is_just_created(job):
    j = job()
    st = step(j, [], None).status
    p = step(j, pods(["Running"]), st)
    assert p.create == (1,) and p.status["phase"] == "Pending"


def test_suspend_and_resume(job):
    j = job()
    st = running_status(j)
    p = step(job(suspend=True), pods(["Running", "Running"]), st)
    assert p.status["phase"] == "Suspended" and set(p.delete) == {"demo-0", "demo-1"}
    assert "startTime" not in p.status and p.status["readyNodes"] == 0
    p2 = step(job(suspend=True), [], p.status)
    assert p2.delete == () and p2.status["phase"] == "Suspended"
    p3 = step(j, [], p2.status, T0 + timedelta(minutes=5))
    assert p3.create == (0, 1) and p3.status["phase"] == "Pending"
    assert p3.status["startTime"] == "2026-01-01T12:05:00Z"


def test_active_deadline_fails_and_stops_pods(job):
    j = job(activeDeadlineSeconds=60)
    st = running_status(j)
    p = step(j, pods(["Running", "Running"]), st, T0 + timedelta(seconds=30))
    # startTime has whole seconds: the job may have started up to 1 s after it, so the
    # deadline counts from the end of that second (never early, at most 1 s late).
    assert p.status["phase"] == "Running" and p.requeue_after == pytest.approx(31)
    p = step(j, pods(["Running", "Running"]), st, T0 + timedelta(seconds=60, milliseconds=999))
    assert p.status["phase"] == "Running"
    p = step(j, pods(["Running", "Running"]), st, T0 + timedelta(seconds=61))
    assert p.status["phase"] == "Failed" and set(p.delete) == {"demo-0", "demo-1"}
    assert {c["type"]: c["reason"] for c in p.status["conditions"]}["Failed"] == "DeadlineExceeded"


def test_ttl_deletes_a_finished_job(job):
    j = job(ttlSecondsAfterFinished=100)
    finishing = step(j, pods(["Succeeded", "Succeeded"]), running_status(j))
    assert finishing.status["phase"] == "Succeeded" and finishing.requeue_after == 100
    assert step(job(), pods(["Succeeded", "Succeeded"]), running_status(j)).requeue_after is None
    done = {"phase": "Succeeded", "completionTime": "2026-01-01T12:00:00Z", "restarts": 0}
    p = step(j, pods(["Succeeded", "Succeeded"]), done, T0 + timedelta(seconds=40))
    assert not p.delete_job and p.requeue_after == pytest.approx(61) and p.status == done
    assert not step(j, pods(["Succeeded", "Succeeded"]), done, T0 + timedelta(seconds=100)).delete_job
    p = step(j, pods(["Succeeded", "Succeeded"]), done, T0 + timedelta(seconds=101))
    assert p.delete_job
    assert not step(job(), [], done, T0 + timedelta(days=9)).delete_job


def test_finished_job_stays_finished(job):
    j = job()
    failed = {"phase": "Failed", "completionTime": "2026-01-01T12:00:00Z", "restarts": 0}
    p = step(j, pods(["Failed", "Running"]), failed)
    assert p.status == {**failed, "readyNodes": 0, "nodes": "0/2"} and p.delete == ("demo-1",) and p.create == ()


def test_nodes_and_ready_nodes_say_no_pod_runs_once_the_job_failed_or_stopped(job):
    j = job(restartPolicy="Never")
    # One member exits 3, the other still runs: the job fails, and the survivor is stopped.
    failing = step(j, pods(["Running", "Failed"], extra={1: {"exit_code": 3}}), running_status(j))
    assert failing.status["phase"] == "Failed" and failing.delete == ("demo-0",)
    assert (failing.status["readyNodes"], failing.status["nodes"]) == (0, "0/2")
    # A status written before this rule (1/2 while no Pod ran) is put right.
    stale = {**failing.status, "readyNodes": 1, "nodes": "1/2"}
    assert (step(j, [], stale).status["readyNodes"], step(j, [], stale).status["nodes"]) == (0, "0/2")
    # A job that succeeded says how many of its nodes did.
    done = step(j, pods(["Succeeded", "Succeeded"]), running_status(j)).status
    assert done["phase"] == "Succeeded" and (done["readyNodes"], done["nodes"]) == (2, "2/2")
    suspended = step(job(suspend=True), pods(["Running", "Running"]), running_status(j)).status
    assert (suspended["phase"], suspended["readyNodes"], suspended["nodes"]) == ("Suspended", 0, "0/2")
    # `ddpjob run` stopped by Ctrl-C: the same counts beside its Failed phase.
    stopped = lifecycle.interrupted(running_status(j), 2, T0)
    assert (stopped["phase"], stopped["readyNodes"], stopped["nodes"]) == ("Failed", 0, "0/2")
    assert {c["type"]: c["status"] for c in stopped["conditions"]} == {"Running": "False", "Failed": "True"}


def test_pod_state_reads_a_pod_body():
    pod = {
        "metadata": {
            "name": "demo-1",
            "labels": {"ddpjob.io/node-rank": "1", "ddpjob.io/restart-count": "2"},
            "deletionTimestamp": "2026-01-01T00:00:00Z",
        },
        "status": {
            "phase": "Failed",
            "containerStatuses": [
                {"name": "sidecar", "state": {"terminated": {"exitCode": 0}}},
                {
                    "name": "trainer",
                    "state": {
                        "terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": "2026-01-01T00:00:01Z"}
                    },
                },
            ],
        },
    }
    s = pod_state(pod)
    assert (s.name, s.node_rank, s.restart_count, s.phase, s.exit_code, s.reason, s.deleting) == (
        "demo-1",
        1,
        2,
        "Failed",
        137,
        "OOMKilled",
        True,
    )
    assert pod_state({"metadata": {"name": "x", "labels": {}}}) is None
    evicted = {
        "metadata": {"name": "demo-0", "labels": {"ddpjob.io/node-rank": "0", "ddpjob.io/restart-count": "0"}},
        "status": {"phase": "Failed", "reason": "Evicted", "message": "low on memory"},
    }
    s = pod_state(evicted)
    assert s.exit_code is None and s.reason == "Evicted" and is_retryable("ExitCode", s.exit_code)


def test_invalid_status(job):
    st = lifecycle.invalid_status(["spec.nodes: must be >= 1 (got 0)"], 3, None, T0)
    assert st["phase"] == "Failed" and st["observedGeneration"] == 3
    assert st["conditions"][0]["reason"] == "InvalidSpec" and "spec.nodes" in st["conditions"][0]["message"]


def test_pods_of_an_earlier_attempt_terminating_on_a_lost_node_are_force_deleted_at_once(job):
    j = job()
    st = {"phase": "Restarting", "restarts": 1, "startTime": "2026-01-01T12:00:00Z"}
    ends = "2026-01-01T12:00:10Z"  # deletionTimestamp: the end of the grace period
    old = pods(
        ["Running", "Running"],
        attempt=0,
        extra={
            0: {"deleting": True, "deletion_time": ends, "node_name": "n0"},
            1: {"deleting": True, "deletion_time": ends, "node_name": None},
        },
    )  # no node: never stuck
    lost = {"n0": "Unknown"}  # its kubelet stopped reporting
    # Within its grace period: no kubelet will ever confirm it, so nothing is waited for.
    early = lifecycle.decide(Observed(job=j, pods=tuple(old), previous=st, now=T0 + timedelta(seconds=2), nodes=lost))
    assert [(f.pod, f.message) for f in early.force_delete] == [
        ("demo-0", "force-deleted Pod demo-0: its node n0 is not Ready (Ready=Unknown), and no kubelet will confirm it")
    ]
    assert "demo-0 on node n0" in early.status["message"]
    gone = lifecycle.decide(Observed(job=j, pods=tuple(old), previous=st, now=T0, nodes={"n0": None}))
    assert [f.message.split(": ", 1)[1] for f in gone.force_delete] == [
        "its node n0 is gone, and no kubelet will confirm it"
    ]
    # On a Ready node (its kubelet will confirm), or one not read: waited for, and named as
    # stuck only once past the grace period and the margin.
    for nodes in ({"n0": "True"}, {}):
        waiting = lifecycle.decide(
            Observed(job=j, pods=tuple(old), previous=st, now=T0 + timedelta(seconds=20), nodes=nodes)
        )
        assert waiting.force_delete == () and waiting.requeue_after == pytest.approx(21)  # 10 + 1 + 30 - 20
        assert "stuck" not in waiting.status["message"]
        late = lifecycle.decide(
            Observed(job=j, pods=tuple(old), previous=st, now=T0 + timedelta(seconds=41), nodes=nodes)
        )
        assert late.force_delete == () and "demo-0 on node n0" in late.status["message"]
        assert late.requeue_after == pytest.approx(30)  # looked at again: the node may be lost by then


def test_pods_of_an_earlier_ddpjob_are_never_deleted(job):
    j = job()
    foreign = pods(["Running", "Failed"], extra={0: {"leftover": True}, 1: {"leftover": True}})
    p = step(j, foreign, None)
    assert p.delete == () and p.create == ()
    assert "earlier DDPJob" in p.status["message"] and "demo-0" in p.status["message"]


def test_status_records_what_auto_resolved_to(job):
    j = job(nprocPerNode="auto", gpusPerNode=4)
    st = step(j, [], None).status
    assert (st["nprocPerNode"], st["backend"], st["worldSize"]) == (4, "nccl", 8)
    st = step(job(), [], None).status
    assert (st["nprocPerNode"], st["backend"], st["worldSize"]) == (2, "gloo", 4)


def test_a_condition_that_turns_false_says_why(job):
    j = job()
    st = running_status(j)
    done = step(j, pods(["Succeeded", "Succeeded"]), st, T0 + timedelta(seconds=60)).status
    conds = {c["type"]: c for c in done["conditions"]}
    assert conds["Running"]["status"] == "False"
    assert (conds["Running"]["reason"], conds["Running"]["message"]) == (
        "Succeeded",
        "all 2 nodes finished successfully",
    )
    assert conds["Running"]["lastTransitionTime"] == "2026-01-01T12:01:00Z"
    # Restarting: Running turns False because of the failure, and says so.
    failed = step(j, pods(["Failed", "Running"], extra={0: {"exit_code": 137, "reason": "OOMKilled"}}), st).status
    conds = {c["type"]: c for c in failed["conditions"]}
    assert conds["Running"]["status"] == "False" and conds["Running"]["reason"] == "GangRestart"
    assert "demo-0" in conds["Running"]["message"]
    # A condition that stays False keeps its reason and transition time.
    later = step(j, [], failed, T0 + timedelta(seconds=2)).status
    kept = {c["type"]: c for c in later["conditions"]}["Running"]
    assert kept == conds["Running"]


def test_messages_count_in_english(job):
    one = job(nodes=1, nprocPerNode=1)
    first = step(one, [], None).status
    up = step(one, pods(["Running"]), first).status
    assert up["message"] == "1 node running (1 process)"
    assert step(one, pods(["Succeeded"]), up).status["message"] == "1 node finished successfully"
    assert (
        step(job(), pods(["Running", "Running"]), step(job(), [], None).status).status["message"]
        == "all 2 nodes running (4 processes)"
    )


def test_a_resumed_job_says_it_was_resumed_not_what_its_first_moment_was(job):
    st = running_status(job())
    paused = step(job(suspend=True), [], step(job(suspend=True), pods(["Running", "Running"]), st).status).status
    resumed = step(job(), [], paused, T0 + timedelta(seconds=5)).status
    assert resumed["phase"] == "Pending"
    done = step(
        job(),
        pods(["Succeeded", "Succeeded"]),
        step(job(), pods(["Running", "Running"]), resumed).status,
        T0 + timedelta(seconds=60),
    ).status
    suspended = {c["type"]: c for c in done["conditions"]}["Suspended"]
    assert (suspended["status"], suspended["reason"], suspended["message"]) == (
        "False",
        "Resumed",
        "resumed: spec.suspend is false",
    )
    assert suspended["lastTransitionTime"] == "2026-01-01T12:00:05Z"


def test_a_world_the_command_cannot_fill_is_a_warning_event_once(job):
    j = job(command=["python", "train.py"], args=[])
    first = step(j, [], None)
    assert [(e.type, e.reason) for e in first.events] == [("Warning", "NotALauncher")]
    assert "spec.nprocPerNode: 2 processes per node" in first.events[0].message
    assert step(j, pods(["Pending", "Pending"]), first.status).events == ()
    assert step(job(), [], None).events == ()  # ddpjob-launch: nothing to say


def test_running_counts_processes_only_where_a_launcher_starts_them(job):
    plain = job(command=["python", "train.py"], args=[])  # 2 nodes x nprocPerNode 2, no launcher
    running = step(plain, pods(["Running", "Running"]), step(plain, [], None).status).status
    assert running["message"] == "all 2 nodes running (python once per node, world size 4)"
    launched = step(job(), pods(["Running", "Running"]), step(job(), [], None).status).status
    assert launched["message"] == "all 2 nodes running (4 processes)"


def test_backend_auto_falling_back_to_gloo_on_a_gpu_job_is_said_once(job):
    j = job(gpusPerNode=1, nprocPerNode=2)
    first = step(j, [], None)
    assert [(e.type, e.reason) for e in first.events] == [("Normal", "BackendGloo")]
    assert first.events[0].message.startswith("spec.backend: auto chose gloo: 2 processes per node share 1 GPU(s)")
    assert step(j, pods(["Pending", "Pending"]), first.status).events == ()
    assert step(job(gpusPerNode=2, nprocPerNode=2), [], None).events == ()  # nccl: nothing to say
    assert step(job(gpusPerNode=1, nprocPerNode=2, backend="gloo"), [], None).events == ()  # asked for


CUDA_LOG = (
    '[rank0]: starting\nTraceback (most recent call last):\n  File "/app/errors.py", line 3, in <module>\n'
    "ddpjob_trainer.env.UsageError: DDPJOB_BACKEND=nccl but this process has no CUDA device\n"
)


def attempts(j, logs, progress_on=()):
    """Run the gang through one failed attempt per log (node 0 exits 2 with that log);
    yields each failure's plan."""
    st, at = step(j, [], None).status, T0
    for attempt, log in enumerate(logs):
        up = step(j, pods(["Running", "Running"], attempt), st, at)
        st = up.status
        if attempt in progress_on:  # the trainer wrote a record in this attempt
            st = {**st, "progress": {"step": 5, "summary": "step 5", "attempt": attempt}}
        failed = step(
            j,
            pods(["Failed", "Running"], attempt, extra={0: {"exit_code": 2, "reason": "Error", "message": log}}),
            st,
            at,
        )
        yield failed
        st, at = failed.status, at + timedelta(minutes=10)
        st = step(j, [], st, at).status  # the old Pods gone, the backoff over


def test_a_failure_says_its_first_error_line():
    from ddpjob.job.failure import error_line

    assert error_line(CUDA_LOG) == (
        "ddpjob_trainer.env.UsageError: DDPJOB_BACKEND=nccl but this process has no CUDA device"
    )
    assert (
        error_line("loading\nddpjob-launch: error: MASTER_ADDR did not resolve\nbye")
        == "ddpjob-launch: error: MASTER_ADDR did not resolve"
    )
    assert error_line("just\nthe last line\n\n") == "the last line" and error_line("") is None


def test_the_same_failure_on_two_attempts_ends_the_job_with_its_line_and_the_way_out(job):
    j = job(restartPolicy="OnFailure", maxRestarts=3)
    first, second = attempts(j, [CUDA_LOG] * 2)
    line = "ddpjob_trainer.env.UsageError: DDPJOB_BACKEND=nccl but this process has no CUDA device"
    assert first.status["lastFailure"]["errorLine"] == line and first.status["lastFailure"]["sameOnAttempts"] == 1
    assert first.status["message"].startswith(f"Pod demo-0 failed (exit code 2, Error): {line}; restarting")
    assert "same failure" not in first.status["message"]
    # A third attempt would meet it too: the job ends, with restarts left.
    assert second.status["phase"] == "Failed"
    assert {c["type"]: c["reason"] for c in second.status["conditions"]}["Failed"] == "PodFailed"
    assert second.status["lastFailure"]["sameOnAttempts"] == 2 and second.status["lastFailure"]["retryable"] is False
    assert second.status["message"] == (
        f"Pod demo-0 failed (exit code 2, Error): {line}; the same failure on all 2 attempts, before any training "
        "progress: not retried again (restartPolicy: ExitCode fails at once on exit codes 1-127)"
    )
    assert [e.reason for e in second.events] == ["RepeatedFailure", "Failed"]
    assert second.events[0].message.startswith(f"{line} (exit code 2): the same failure on all 2 attempts")


def test_torch_ranks_failure_is_the_same_on_each_attempt_though_its_times_and_pids_differ(job):
    """A script's own exception under torchrun: the line is the rank's, and the attempts'
    differing times, pids and ports do not make it another failure."""
    log = (
        '[rank0]: Traceback (most recent call last):\n[rank0]:   File "/app/crash.py", line 7, in <module>\n'
        "[rank0]: RuntimeError: boom at step 5 on rank 0\n[rank1]: RuntimeError: Connection closed by peer "
        "[10.0.0.{n}]:{port}\nE1129 07:0{n}:37.744000 18{n}7 torch/distributed/elastic/multiprocessing/"
        "api.py:1002] failed (exitcode: 1) local_rank: 0 (pid: 19{n}6) of binary: /venv/bin/python\n"
    )
    first, second = attempts(
        job(restartPolicy="OnFailure", maxRestarts=3), [log.format(n=1, port=4319), log.format(n=2, port=55012)]
    )
    assert first.status["lastFailure"]["errorLine"] == "[rank0]: RuntimeError: boom at step 5 on rank 0"
    assert second.status["phase"] == "Failed" and second.status["lastFailure"]["sameOnAttempts"] == 2
    assert second.status["message"].startswith(
        "Pod demo-0 failed (exit code 2, Error): [rank0]: RuntimeError: boom at step 5 on rank 0; the same failure"
    )


def test_a_repeated_failure_that_blames_the_network_or_a_signal_is_retried_as_the_policy_says(job):
    j = job(restartPolicy="OnFailure", maxRestarts=2)
    peer = "torch.distributed.DistNetworkError: failed to connect to demo-0.demo.ml.svc:29500\n"
    _first, second, third = attempts(j, [peer] * 3)
    assert second.status["phase"] == "Restarting" and second.status["lastFailure"]["sameOnAttempts"] == 2
    assert (
        "set restartPolicy: ExitCode to fail at once on exit codes 1-127; restarting the gang (2/2)"
        in second.status["message"]
    )
    assert third.status["phase"] == "Failed" and third.status["message"].endswith(
        "the same failure on all 3 attempts, before any training progress; set restartPolicy: ExitCode to fail at "
        "once on exit codes 1-127; maxRestarts=2 reached"
    )


def test_a_failure_after_training_progress_or_a_different_one_is_not_called_repeated(job):
    j = job(restartPolicy="OnFailure", maxRestarts=3)
    plans = list(attempts(j, [CUDA_LOG, CUDA_LOG, CUDA_LOG], progress_on=(1,)))
    assert all("same failure" not in p.status["message"] for p in plans)
    plans = list(attempts(j, [CUDA_LOG, "RuntimeError: out of memory\n", CUDA_LOG]))
    assert all("same failure" not in p.status["message"] for p in plans)
    # ExitCode already fails 1-127 at once: the advice is only for the policy that retries them.
    (only,) = attempts(job(restartPolicy="ExitCode"), [CUDA_LOG])
    assert only.status["phase"] == "Failed" and "restartPolicy: ExitCode" not in only.status["message"]


def test_reordering_and_line_splitting_characters_of_a_termination_message_are_escaped(job):
    """A Pod's termination message is written by the Pod: U+202E would show `exit 1` as
    `1 tixe` in `kubectl describe`, U+2028 starts a new line where none is."""
    j = job(restartPolicy="Never")
    st = running_status(j)
    message = "ok\u202e1 tixe\u2028forged: Succeeded\u2066x\u200b"
    failed = pod_state(
        {
            "metadata": {
                "name": "demo-0",
                "labels": {"ddpjob.io/job-name": "demo", "ddpjob.io/node-rank": "0", "ddpjob.io/restart-count": "0"},
            },
            "status": {
                "phase": "Failed",
                "containerStatuses": [
                    {"name": "trainer", "state": {"terminated": {"exitCode": 1, "reason": "Error", "message": message}}}
                ],
            },
        }
    )
    p = step(j, [failed, *pods(["Failed", "Running"])[1:]], st)
    shown = [p.status["message"], p.status["lastFailure"]["message"], *(e.message for e in p.events)]
    assert p.status["lastFailure"]["message"].endswith("ok\\u202e1 tixe\\u2028forged: Succeeded\\u2066x\\u200b")
    for text in shown:
        assert not any(ch in text for ch in "\u202e\u2028\u2066\u200b"), text
