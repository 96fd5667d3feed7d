"""A deterministic bug in the user's own script, on the real control plane: the process
kubelet runs real `ddpjob-launch` -> torchrun -> the script, rank 0 raises at step 3 on
every attempt, and the operator says that exception, with its rank (the line
ddpjob-launch left as the Pod's termination message), in the status and the Events, then
ends the job at the second identical attempt with `maxRestarts` to spare."""

from __future__ import annotations

import copy
import pathlib

import pytest

from ddpjob_devcluster.clusters.client import load_example, wait_until
from ddpjob_devcluster.clusters.real import RealCluster
from tests.support.deadlines import CLUSTER_TEST, REACTION, RUN

pytestmark = [pytest.mark.slow, pytest.mark.timeout(CLUSTER_TEST)]

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "local" / "scripts" / "raise_at_step.py"
LINE = "[rank0]: RuntimeError: boom at step 3 on rank 0"


def test_a_scripts_exception_is_the_reason_and_its_repeat_ends_the_job(cluster: RealCluster) -> None:
    name = "crash"
    body = copy.deepcopy(load_example())
    body["metadata"]["name"] = name
    body["spec"].update(
        nodes=2,
        nprocPerNode=1,
        command=["ddpjob-launch"],
        args=[str(SCRIPT)],
        restartPolicy="OnFailure",
        maxRestarts=3,
        restartBackoffSeconds=0,
        env=[{"name": "DDPJOB_TEST_FAIL_RANK", "value": "0"}, {"name": "DDPJOB_TEST_FAIL_STEP", "value": "3"}],
    )
    body["spec"].pop("checkpoint", None)
    cluster.create_job(body)
    status = cluster.wait_phase(name, "Failed", timeout=RUN)
    failure = status["lastFailure"]
    assert (failure["pod"], failure["exitCode"], failure["errorLine"]) == (f"{name}-0", 1, LINE), status
    assert failure["sameOnAttempts"] == 2 and failure["retryable"] is False and status["restarts"] == 1, status
    assert status["message"] == (
        f"Pod {name}-0 failed (exit code 1, Error): {LINE}; the same failure on all 2 attempts, before any "
        "training progress: not retried again (restartPolicy: ExitCode fails at once on exit codes 1-127)"
    )

    # The first attempt's restart, the repeat and the end are said with the script's line.
    def said() -> list[tuple[str, str]] | None:
        events = [(e["reason"], e["message"]) for e in cluster.events(name) if e["type"] == "Warning"]
        reasons = {reason for reason, _ in events}
        return events if {"Restarting", "RepeatedFailure", "Failed"} <= reasons else None

    events = wait_until(
        said, REACTION, "no Warning events Restarting, RepeatedFailure and Failed", lambda: cluster.events(name)
    )
    assert all(LINE in message for reason, message in events if reason in ("Restarting", "RepeatedFailure")), events
