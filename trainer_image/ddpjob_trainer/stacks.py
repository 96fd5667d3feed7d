"""Every thread's Python stack, printed to the process's stderr (the Pod's log) when it
would otherwise say nothing of where it is:

- `kill -USR1 <pid>` in a trainer's container: where a hung rank or launcher waits (a
  collective, a store, a peer's answer), and the process goes on, with no debugger in
  the image (`dump_on_signal`);
- a crash in native code (a segfault in an extension or in gloo, an abort): the process
  dies of its signal as before, but first says where each thread was, the crashing one
  under `Current thread` (`dump_on_crash`). error_lines.py reads that into the failure's
  line, so a Pod that ended 139 says what crashed, in the user's own script too.

faulthandler writes from its own C signal handler, so it answers while every Python
thread is stuck in native code (gloo, a TCPStore call), where a Python handler would
never run."""

from __future__ import annotations

import faulthandler
import io
import os
import signal
import sys
from collections.abc import Callable, MutableMapping
from typing import Any

SIGNAL = signal.SIGUSR1
# Python's own switch: set, every Python process started from here enables faulthandler at
# start-up (torchrun, its workers, a user's script), whatever its code does.
CRASH_ENV = "PYTHONFAULTHANDLER"


def _install(install: Callable[[Any], None]) -> None:
    """faulthandler writes to a file descriptor: where stderr was replaced by an object that
    has none (a caller capturing it), the process's own stderr; with neither, nothing."""
    for stream in (sys.stderr, sys.__stderr__):
        if stream is None:
            continue
        try:
            install(stream)
            return
        except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
            continue


def dump_on_signal() -> None:
    """From now on, SIGNAL prints the stacks and the process goes on (nothing else uses it)."""
    _install(lambda stream: faulthandler.register(SIGNAL, file=stream, all_threads=True, chain=False))


def dump_on_crash(env: MutableMapping[str, str] | None = None) -> None:
    """From now on, a crash prints the stacks before the process dies, here and in every
    Python process started from here. A user who set CRASH_ENV keeps their choice (empty:
    off, as Python reads it)."""
    env = os.environ if env is None else env
    if env.get(CRASH_ENV, "1") == "":
        return
    env.setdefault(CRASH_ENV, "1")
    _install(lambda stream: faulthandler.enable(file=stream, all_threads=True))
