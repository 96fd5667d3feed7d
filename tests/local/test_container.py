"""A Pod's trainer container as a local process tree, as `ddpjob run` and the dev kubelet use it."""

from __future__ import annotations

import io
import signal
import sys
import time

import pytest

from ddpjob.local.container import LocalRunError, StartError, start_container


def pod(*command: str) -> dict:
    return {
        "metadata": {"name": "j-0", "namespace": "ns"},
        "spec": {"containers": [{"name": "trainer", "command": list(command)}]},
    }


def wait_end(proc, timeout: float = 20.0):
    deadline = time.time() + timeout
    while (end := proc.terminated()) is None and time.time() < deadline:
        time.sleep(0.02)
    return end


def test_an_exit_code_is_reported_as_a_runtime_would() -> None:
    out = io.StringIO()
    end = wait_end(start_container(pod(sys.executable, "-c", "print('hi'); raise SystemExit(3)"), out=out))
    assert (end.exit_code, end.reason, end.phase) == (3, "Error", "Failed")


def test_success_is_completed() -> None:
    end = wait_end(start_container(pod(sys.executable, "-c", "pass"), out=io.StringIO()))
    assert (end.exit_code, end.reason, end.phase) == (0, "Completed", "Succeeded")


def test_a_signal_is_128_plus_its_number() -> None:
    proc = start_container(pod(sys.executable, "-c", "import time; time.sleep(30)"), out=io.StringIO())
    time.sleep(0.2)
    proc.signal(signal.SIGKILL)
    assert wait_end(proc).exit_code == 128 + signal.SIGKILL


def test_a_missing_program_is_a_typed_start_error() -> None:
    with pytest.raises(StartError) as info:
        start_container(pod("no-such-program-anywhere"), out=io.StringIO())
    assert isinstance(info.value, LocalRunError)
    assert (info.value.exit_code, info.value.reason) == (128, "StartError")
    assert "spec.command" in str(info.value)
