"""`kill -USR1` prints a trainer process's thread stacks and the process goes on
(ddpjob_trainer/stacks.py): how a hung rank says where it waits, from the Pod's log."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest

from ddpjob_trainer import UsageError, launch, stacks, train

# A process that registers the dump, then waits in a named function on a second thread
# (as a rank waits in a collective) while its main thread sleeps.
PROGRAM = textwrap.dedent(
    """
    import sys, threading, time
    from ddpjob_trainer import stacks

    def waiting_in_a_collective(event):
        event.wait()

    stacks.dump_on_signal()
    threading.Thread(target=waiting_in_a_collective, args=(threading.Event(),), daemon=True).start()
    print("ready", flush=True)
    time.sleep(float(sys.argv[1]))
    print("still running", flush=True)
    """
)


def test_the_signal_prints_every_threads_stack_and_the_process_goes_on() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", PROGRAM, "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        proc.send_signal(stacks.SIGNAL)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err  # not ended by the signal (its default action)
    assert out.strip() == "still running"
    assert "waiting_in_a_collective" in err and "Current thread 0x" in err and "\nThread 0x" in "\n" + err, err


@pytest.mark.parametrize("entry", ["launch", "train"])
def test_the_launcher_and_the_trainer_register_it(entry: str, monkeypatch) -> None:
    """Both entry points register the dump before anything can hang (here each then ends
    at once on bad input)."""
    called: list[str] = []
    monkeypatch.setattr(stacks, "dump_on_signal", lambda: called.append("signal"))
    monkeypatch.setattr(stacks, "dump_on_crash", lambda: called.append("crash"))
    if entry == "launch":
        assert launch.main(["--no-such-flag"]) == 2
    else:

        def no_environment():
            raise UsageError("no rendezvous environment")

        monkeypatch.setattr(train, "read_process_env", no_environment)
        assert train.main(["--model", "mlp", "--data", "synthetic"]) == 2
    assert called == ["signal", "crash"]


def test_a_stderr_without_a_file_descriptor_is_no_failure(monkeypatch) -> None:
    """A caller that captured stderr (an object with no fileno): the process's own stderr
    is used; with none at all, the dump is simply not installed."""
    import io

    registered: list[object] = []

    def register(signum: int, file: Any, **_: Any) -> None:
        registered.append(file)
        file.fileno()  # as faulthandler asks it: a StringIO has none

    monkeypatch.setattr("faulthandler.register", register)
    monkeypatch.setattr("sys.stderr", io.StringIO())
    stacks.dump_on_signal()
    assert registered[-1] is sys.__stderr__
    monkeypatch.setattr("sys.__stderr__", None)
    stacks.dump_on_signal()  # no exception: nothing installed
    assert registered[-1] is sys.stderr


def test_a_crash_dump_is_turned_on_for_what_the_process_starts_unless_the_user_said_no(monkeypatch) -> None:
    enabled: list[object] = []
    monkeypatch.setattr("faulthandler.enable", lambda file, **_: enabled.append(file))
    env: dict[str, str] = {}
    stacks.dump_on_crash(env)
    assert env == {stacks.CRASH_ENV: "1"} and len(enabled) == 1
    env = {stacks.CRASH_ENV: "2"}  # any other non-empty value: on, as the user said it
    stacks.dump_on_crash(env)
    assert env == {stacks.CRASH_ENV: "2"} and len(enabled) == 2
    env = {stacks.CRASH_ENV: ""}  # empty: off, as Python reads it, here too
    stacks.dump_on_crash(env)
    assert env == {stacks.CRASH_ENV: ""} and len(enabled) == 2
