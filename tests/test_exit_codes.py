"""Exit codes: one "128+N" for `ddpjob run`, the kubelet, the trainer and the restart policy."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

import ddpjob_trainer
from ddpjob import exit_codes
from ddpjob.job.restart_policy import is_retryable


@pytest.mark.parametrize("returncode, code", [(0, 0), (3, 3), (127, 127), (-9, 137), (-15, 143), (143, 143)])
def test_a_signal_is_128_plus_its_number(returncode: int, code: int) -> None:
    assert exit_codes.of_returncode(returncode) == code


def test_a_killed_process_reads_as_a_runtime_reports_it() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    proc.send_signal(signal.SIGKILL)
    assert exit_codes.of_returncode(proc.wait(30)) == 137 == exit_codes.of_signal(signal.SIGKILL)


def test_the_trainers_codes_are_the_contracts() -> None:
    assert (ddpjob_trainer.EXIT_BAD_INPUT, ddpjob_trainer.EXIT_PREEMPTED, ddpjob_trainer.EXIT_RENDEZVOUS_TIMEOUT) == (
        2,
        143,
        142,
    )


@pytest.mark.parametrize(
    "code, retryable",
    [
        (exit_codes.BAD_INPUT, False),
        (1, False),
        (127, False),
        (exit_codes.PREEMPTED, True),
        (exit_codes.RENDEZVOUS_TIMEOUT, True),
        (exit_codes.START_ERROR, True),
        (137, True),
    ],
)
def test_the_exit_code_policy_reads_the_same_codes(code: int, retryable: bool) -> None:
    assert exit_codes.is_signal(code) == retryable
    assert is_retryable("ExitCode", code) == retryable
