"""`ddpjob run` shows progress and applies the stall rule: rank 1 stops making progress
without exiting, the gang is restarted as Stalled, resumes from its checkpoint, succeeds."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.deadlines import CLUSTER_TEST, RUN

pytestmark = [pytest.mark.slow, pytest.mark.timeout(CLUSTER_TEST)]


def test_a_hung_rank_is_detected_restarted_and_the_job_resumes_and_succeeds(tmp_path):
    body = {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {"name": "stall"},
        "spec": {
            "nodes": 2,
            "nprocPerNode": 1,
            "image": "local",
            "restartBackoffSeconds": 0,
            "maxRestarts": 1,
            "stallTimeoutSeconds": 10,
            "checkpoint": {"claimName": "ckpt"},
            "command": ["ddpjob-launch"],
            # 512 samples / (16 x 2 ranks) = 16 steps an epoch; rank 1 hangs before step 20.
            "args": [
                "ddpjob-train",
                "--epochs",
                "2",
                "--synthetic-size",
                "512",
                "--batch-size",
                "16",
                "--log-every",
                "2",
                "--eval-every",
                "0",
            ],
            "env": [{"name": "DDPJOB_TEST_HANG_AT_STEP", "value": "20"}],
        },
    }
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(body))
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    result = subprocess.run(
        [sys.executable, "-m", "ddpjob.cli", "run", "-o", "yaml", str(path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=RUN,
        env=env,
    )
    out = result.stdout
    assert result.returncode == 0, out[-4000:] + result.stderr[-2000:]
    status = yaml.safe_load(out.split("\n---\n")[-1])["status"]
    assert status["phase"] == "Succeeded" and status["restarts"] == 1
    failure = status["lastFailure"]
    assert failure["reason"] == "Stalled"
    assert "rank(s) 1 stopped at step 19 while the others reached step 20" in failure["message"]
    assert "stallTimeoutSeconds=10" in failure["message"]
    # Stalled was True until the second attempt advanced again.
    stalled = {c["type"]: c for c in status["conditions"]}["Stalled"]
    assert (stalled["status"], stalled["reason"]) == ("False", "Progressing")
    assert "phase Restarting: no progress for" in out
    assert "hangs before step 20" in out
    # The second attempt resumed from a checkpoint instead of starting over.
    assert "resumed from" in out.split("attempt 1")[-1]
    assert status["progress"]["step"] == 32 and status["progress"]["summary"] == "epoch 2/2 step 32/32 (100%)"
    # Not a terminal: plain progress lines.
    assert "[ddpjob] stall: epoch " in out
