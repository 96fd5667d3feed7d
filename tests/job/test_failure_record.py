"""`status.lastFailure`'s words for a Pod that exited: its own error line, or none where a
signal ended it (the log's last line is then whatever it was doing)."""

from datetime import UTC, datetime

import pytest

from ddpjob.job.failure import failure_record
from ddpjob.job.observe import PodState

NOW = datetime(2026, 1, 1, tzinfo=UTC)
TAIL = "epoch 1/1 step 12\nddpjob-train: error: no node of generation 3 ([0, 1]) answers\n"


def failed(code: int, message: str = TAIL, reason: str = "Error") -> PodState:
    return PodState("job-2", 2, 0, "Failed", exit_code=code, reason=reason, message=message)


def test_the_trainers_own_rendezvous_timeout_says_which_wait_ran_out():
    """142 is the trainer's verdict that its peers did not come (exit_codes.RENDEZVOUS_TIMEOUT),
    said in its last error line: that line is the failure's, not a signal's silence."""
    record = failure_record(failed(142), "ExitCode", NOW)
    assert record["errorLine"] == "ddpjob-train: error: no node of generation 3 ([0, 1]) answers"
    assert record["message"].endswith(": ddpjob-train: error: no node of generation 3 ([0, 1]) answers")
    assert record["retryable"] is True


@pytest.mark.parametrize("code,reason", [(137, "OOMKilled"), (143, "Error"), (139, "Error")])
def test_a_signal_leaves_no_error_line_of_what_it_was_doing(code, reason):
    record = failure_record(failed(code, reason=reason), "ExitCode", NOW)
    assert "errorLine" not in record and record["message"] == f"Pod job-2 failed (exit code {code}, {reason})"


def test_a_programs_own_exit_code_says_its_error_line():
    record = failure_record(failed(1), "ExitCode", NOW)
    assert record["errorLine"].startswith("ddpjob-train: error:") and record["retryable"] is False


def test_a_crash_says_where_it_crashed_though_a_signal_ended_it():
    """faulthandler's dump (ddpjob-launch turns it on) is the crash's own word: its line is
    the failure's, beside the 139 of the SIGSEGV."""
    tail = TAIL + (
        "Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f (most recent call first):\n"
        '  File "/app/train.py", line 9 in step\n'
    )
    record = failure_record(failed(139, message=tail), "ExitCode", NOW)
    assert record["errorLine"] == "Fatal Python error: Segmentation fault: in step (/app/train.py:9)"
    assert record["message"] == f"Pod job-2 failed (exit code 139, Error): {record['errorLine']}"
    assert record["retryable"] is True  # a signal, under ExitCode
