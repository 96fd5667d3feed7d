"""`kill -USR1 <pid>` in a trainer's container prints every thread's Python stack to the
process's stderr (the Pod's log): where a hung rank or launcher waits (a collective, a
store, a peer's answer), with no debugger in the image. faulthandler writes from its own
C signal handler, so it answers while every Python thread is stuck in native code (gloo,
a TCPStore call), where a Python handler would never run."""

from __future__ import annotations

import faulthandler
import signal
import sys

SIGNAL = signal.SIGUSR1


def dump_on_signal() -> None:
    """From now on, SIGNAL prints the stacks and the process goes on (nothing else uses it)."""
    faulthandler.register(SIGNAL, file=sys.stderr, all_threads=True, chain=False)
