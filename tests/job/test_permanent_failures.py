"""Failures no attempt can change (ddpjob.exit_codes.never_retried): a container that could
not start, and a bad command line (argparse's exit 2). They fail the job at once, whatever
the restartPolicy, with the runtime's or the program's own words in the status."""

from datetime import UTC, datetime, timedelta

import pytest

from ddpjob.api.spec import parse_job
from ddpjob.job import lifecycle
from ddpjob.job.observe import PodState, pod_state
from ddpjob.job.restart_policy import is_retryable

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
# What containerd says of a command the image does not have (the kubelet copies it into
# state.terminated.message; FallbackToLogsOnError only fills an empty one).
CONTAINERD = (
    "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create "
    'failed: unable to start container process: exec: "ddpjob-lanch": executable file not found in $PATH: '
    "unknown"
)
USAGE_TAIL = (
    "usage: ddpjob-train [-h] [--model MODEL] [--data DATA]\n"
    "                    [--batch-size BATCH_SIZE] [--lr LR]\n"
    "ddpjob-train: error: unrecognized arguments: --batch-sise 64\n"
    "E1128 05:56:21 torch.distributed.elastic.multiprocessing.api: failed (exitcode: 2) local_rank: 0\n"
)


@pytest.fixture
def job(job_body):
    def make(**spec):
        return parse_job(job_body(**{"restartBackoffSeconds": 10, "maxRestarts": 3, **spec}))

    return make


def start_error_pod(rank=0, attempt=0):
    return pod_state(
        {
            "metadata": {
                "name": f"demo-{rank}",
                "labels": {
                    "ddpjob.io/job-name": "demo",
                    "ddpjob.io/node-rank": str(rank),
                    "ddpjob.io/restart-count": str(attempt),
                },
            },
            "status": {
                "phase": "Failed",
                "containerStatuses": [
                    {
                        "name": "trainer",
                        "state": {
                            "terminated": {
                                "exitCode": 128,
                                "reason": "StartError",
                                "message": CONTAINERD,
                                "finishedAt": "2026-01-01T12:00:01Z",
                            }
                        },
                    }
                ],
            },
        }
    )


@pytest.mark.parametrize("policy", ["OnFailure", "ExitCode", "Never"])
def test_a_container_that_cannot_start_fails_the_job_at_once_with_the_runtimes_reason(job, policy):
    j = job(restartPolicy=policy, command=["ddpjob-lanch"])
    pending = lifecycle.plan(j, [], None, T0).status
    other = PodState(name="demo-1", node_rank=1, restart_count=0, phase="Pending")
    p = lifecycle.plan(j, [start_error_pod(), other], pending, T0 + timedelta(seconds=2))
    assert p.status["phase"] == "Failed" and p.status.get("restarts", 0) == 0
    failure = p.status["lastFailure"]
    assert failure["retryable"] is False and failure["exitCode"] == 128 and failure["reason"] == "StartError"
    assert failure["errorLine"] == CONTAINERD
    assert failure["message"] == f"Pod demo-0 failed (exit code 128, StartError): {CONTAINERD}"
    assert p.status["message"] == (
        f"{failure['message']}; the container could not start: not retried under any restartPolicy"
    )
    assert {c["type"]: c["reason"] for c in p.status["conditions"]}["Failed"] == "PodFailed"
    assert "demo-1" in p.delete


def test_an_elastic_job_does_not_replace_a_pod_that_cannot_start(job):
    j = job(restartPolicy="OnFailure", nodes=3, elastic={"minNodes": 2, "maxNodes": 4})
    up = [PodState(name=f"demo-{r}", node_rank=r, restart_count=0, phase="Running") for r in range(3)]
    st = lifecycle.plan(j, up, lifecycle.plan(j, [], None, T0).status, T0).status
    assert st["phase"] == "Running"
    p = lifecycle.plan(j, [*up[:2], start_error_pod(2)], st, T0 + timedelta(seconds=5))
    assert p.status["phase"] == "Failed" and "could not start" in p.status["message"]


# What runc says when the node's own runtime fails to start a container (here a kind node
# just started again after a kill): nothing of the command.
RUNTIME_FAULT = (
    "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create "
    "failed: unable to start container process: error during container init: error setting cgroup config "
    "for procHooks process: unable to freeze: unknown"
)


@pytest.mark.parametrize("policy,retried", [("OnFailure", True), ("ExitCode", True), ("Never", False)])
def test_a_start_error_of_the_nodes_runtime_is_left_to_the_policy(job, policy, retried):
    """Not the command's fault: the next attempt may well start, so the job is not failed
    at once (an elastic job's member lost to it, on a node just back, is made again)."""
    j = job(restartPolicy=policy)
    st = lifecycle.plan(j, [], None, T0).status
    faulted = start_error_pod()
    faulted = PodState(**{**faulted.__dict__, "message": RUNTIME_FAULT})
    p = lifecycle.plan(j, [faulted, PodState(name="demo-1", node_rank=1, restart_count=0, phase="Running")], st, T0)
    failure = p.status["lastFailure"]
    assert failure["retryable"] is retried and failure["errorLine"] == RUNTIME_FAULT
    assert (p.status["phase"] != "Failed") is retried, p.status
    assert is_retryable(policy, 128, "StartError", RUNTIME_FAULT) is retried
    # The same words naming a command that cannot run stay permanent under every policy.
    for missing in (CONTAINERD, RUNTIME_FAULT.replace("unable to freeze", "exec: /bin/x: permission denied")):
        assert not is_retryable(policy, 128, "StartError", missing)
    assert not is_retryable(policy, 128, "StartError", "spec.command: 'x' is not installed on this machine")


def test_an_elastic_member_lost_to_a_runtime_fault_is_made_again(job):
    j = job(restartPolicy="OnFailure", nodes=2, elastic={"minNodes": 1, "maxNodes": 2})
    up = [PodState(name=f"demo-{r}", node_rank=r, restart_count=0, phase="Running") for r in range(2)]
    st = lifecycle.plan(j, up, lifecycle.plan(j, [], None, T0).status, T0).status
    faulted = PodState(**{**start_error_pod(1).__dict__, "message": RUNTIME_FAULT})
    p = lifecycle.plan(j, [up[0], faulted], st, T0 + timedelta(seconds=5))
    assert p.status["phase"] != "Failed", p.status
    assert "demo-0" not in p.delete  # the survivor trains on


def test_a_bad_command_line_is_not_retried_under_on_failure(job):
    j = job(restartPolicy="OnFailure")
    st = lifecycle.plan(j, [], None, T0).status
    bad = PodState(
        name="demo-0", node_rank=0, restart_count=0, phase="Failed", exit_code=2, reason="Error", message=USAGE_TAIL
    )
    p = lifecycle.plan(j, [bad, PodState(name="demo-1", node_rank=1, restart_count=0, phase="Running")], st, T0)
    assert p.status["phase"] == "Failed" and p.status.get("restarts", 0) == 0
    assert p.status["lastFailure"]["errorLine"] == "ddpjob-train: error: unrecognized arguments: --batch-sise 64"
    assert p.status["message"].endswith("bad input (exit code 2): not retried under any restartPolicy")


@pytest.mark.parametrize(
    "code, reason, line, on_failure",
    [
        (2, "Error", "ddpjob-train: error: unrecognized arguments: --x", False),  # argparse, the trainer's bad input
        (2, "Error", "train.py: error: the following arguments are required: --data", False),
        (2, "Error", "ConnectionError: the feature store did not answer", True),  # a script's own exit 2
        (2, "Error", None, True),
        (1, "Error", "prog: error: bad", True),  # argparse's form, but not argparse's code: the policy decides
        (128, "StartError", "exec: not found", False),
        (128, "Error", None, True),  # 128 that is no start failure: a signal's range, as before
    ],
)
def test_what_no_policy_retries(code, reason, line, on_failure):
    assert is_retryable("OnFailure", code, reason, line) is on_failure
    if not on_failure:
        assert not is_retryable("ExitCode", code, reason, line)


def test_a_misspelt_launcher_is_one_warning_that_names_the_typo(job):
    first = lifecycle.plan(job(command=["ddpjob-lanch"]), [], None, T0)
    assert [(e.type, e.reason) for e in first.events] == [("Warning", "MisspeltCommand")]
    assert "did you mean 'ddpjob-launch'?" in first.events[0].message


def test_the_typo_is_said_when_the_gang_failed_before_the_operator_looked_again(job):
    """The step that creates the Pods writes no status, so its Events wait for the next step;
    on a busy machine that step already sees the Pods failed and decides Failed, not Pending.
    The warning belongs to the job's first written status, whichever policy decides it."""
    j = job(command=["ddpjob-lanch"], args=[])
    first = lifecycle.plan(j, [], None, T0)
    assert first.create == (0, 1) and not first.write_status  # its Events are not posted
    failed = lifecycle.plan(j, [start_error_pod(0), start_error_pod(1)], None, T0 + timedelta(seconds=1))
    assert failed.status["phase"] == "Failed" and failed.write_status
    assert [(e.type, e.reason) for e in failed.events] == [("Warning", "MisspeltCommand"), ("Warning", "Failed")]
    assert lifecycle.plan(j, [start_error_pod(0), start_error_pod(1)], failed.status, T0).events == ()


def test_a_world_warning_is_not_said_again_at_each_gang_restart(job):
    j = job(command=["python", "train.py"], args=[], restartPolicy="OnFailure")
    st = lifecycle.plan(j, [], None, T0).status
    up = [PodState(name=f"demo-{r}", node_rank=r, restart_count=0, phase="Running") for r in range(2)]
    st = lifecycle.plan(j, up, st, T0).status
    failed = PodState(name="demo-0", node_rank=0, restart_count=0, phase="Failed", exit_code=137)
    st = lifecycle.plan(j, [failed, up[1]], st, T0).status
    assert st["phase"] == "Restarting"
    again = lifecycle.plan(j, [], st, T0 + timedelta(minutes=5))
    assert again.create == (0, 1) and again.events == ()
