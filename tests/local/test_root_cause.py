"""A deterministic bug in the user's own script, under `ddpjob run` with real torchrun:
the failure is said by the failing rank's own exception, with its rank (not torchrun's
`failed (exitcode: 1) local_rank: 0 (pid: ...)`), and the second attempt that fails the
same way ends the job with the way out, whatever its times and pids. A crash in native
code (a segfault) says where it crashed, in the script's own function."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

SCRIPT = Path(__file__).parent / "scripts" / "raise_at_step.py"
pytestmark = pytest.mark.slow


def run_crash(
    tmp_path: Path, *, nproc: int, fail_rank: int, restarts: int = 3, **env: str
) -> tuple[subprocess.CompletedProcess, dict]:
    body = {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {"name": "crash"},
        "spec": {
            "nodes": 1,
            "nprocPerNode": nproc,
            "image": "local",
            "command": ["ddpjob-launch"],
            "args": [str(SCRIPT)],
            "restartPolicy": "OnFailure",
            "maxRestarts": restarts,
            "restartBackoffSeconds": 0,
            "env": [
                {"name": k, "value": v}
                for k, v in {"DDPJOB_TEST_FAIL_RANK": str(fail_rank), "DDPJOB_TEST_FAIL_STEP": "3", **env}.items()
            ],
        },
    }
    path = tmp_path / "crash.yaml"
    path.write_text(yaml.safe_dump(body))
    done = subprocess.run(
        [sys.executable, "-m", "ddpjob.cli", "run", "-o", "yaml", str(path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "-1"},
    )
    return done, yaml.safe_load(done.stdout.split("\n---\n")[-1])["status"]


def test_a_scripts_exception_is_the_failure_and_its_second_time_ends_the_job(tmp_path):
    # Rank 2 of 3 raises; ranks 0 and 1 follow with their broken connections, whose
    # tracebacks fill the log's tail that the kubelet would keep.
    done, status = run_crash(tmp_path, nproc=3, fail_rank=2)
    assert done.returncode == 1, done.stdout + done.stderr
    line = "[rank2]: RuntimeError: boom at step 3 on rank 2"
    failure = status["lastFailure"]
    assert (failure["errorLine"], failure["exitCode"], failure["sameOnAttempts"]) == (line, 1, 2), status
    assert status["restarts"] == 1 and status["phase"] == "Failed"  # 2 attempts of the 4 allowed
    assert status["message"] == (
        f"Pod crash-0 failed (exit code 1, Error): {line}; the same failure on all 2 attempts, before any training "
        "progress: not retried again (restartPolicy: ExitCode fails at once on exit codes 1-127)"
    )
    # The first attempt's failure was said with the same line, and the launcher said it last.
    assert f"[ddpjob] phase Restarting: Pod crash-0 failed (exit code 1, Error): {line}; restarting" in done.stdout
    assert done.stdout.count(f"[crash-0] ddpjob-launch: first to fail: {line}\n") == 2


def test_a_recorded_exception_is_found_in_its_error_file_when_the_log_has_none(tmp_path):
    """A script decorated with torch's `record` writes its exception to the error file
    torchrun gives each worker; this one's traceback never reaches the log."""
    done, status = run_crash(tmp_path, nproc=2, fail_rank=1, restarts=0, DDPJOB_TEST_RECORD="1", DDPJOB_TEST_QUIET="1")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "boom at step" not in done.stdout.split("ddpjob-launch: first to fail:")[0]  # not in the log
    assert status["lastFailure"]["errorLine"] == "[rank1]: RuntimeError: boom at step 3 on rank 1", status


def test_a_segfault_in_the_script_says_where_it_crashed(tmp_path):
    """No exception, no error file: the rank dies of SIGSEGV. ddpjob-launch turned
    faulthandler on for its workers, so the crash's dump names the function it crashed in
    and the script's own frame, and that is the failure's line beside exit code 139."""
    done, status = run_crash(tmp_path, nproc=2, fail_rank=1, restarts=0, DDPJOB_TEST_CRASH="1")
    assert done.returncode == 1, done.stdout + done.stderr
    failure = status["lastFailure"]
    assert failure["exitCode"] == 139, status
    line = failure["errorLine"]
    assert line.startswith("Fatal Python error: Segmentation fault: in string_at (ctypes/__init__.py:"), status
    assert line.endswith(f"from read_freed_memory ({SCRIPT}:{read_freed_memory_line()})"), status
    assert status["message"].startswith(f"Pod crash-0 failed (exit code 139, Error): {line}"), status


def read_freed_memory_line() -> int:
    """The line of the script's crashing call, as faulthandler numbers it."""
    lines = SCRIPT.read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if "ctypes.string_at(0)" in text)
