"""`kill -USR1 <pid>` in a trainer's container prints every thread's Python stack to the
process's stderr (the Pod's log): where a hung rank or launcher waits (a collective, a
store, a peer's answer), with no debugger in the image. faulthandler writes from its own
C signal handler, so it answers while every Python thread is stuck in native code (gloo,
a TCPStore call), where a Python handler would never run."""

from __future__ import annotations

import faulthandler
import io
import signal
import sys

SIGNAL = signal.SIGUSR1


def dump_on_signal() -> None:
    """From now on, SIGNAL prints the stacks and the process goes on (nothing else uses it).
    faulthandler writes to a file descriptor: where stderr was replaced by an object that
    has none (a caller capturing it), the process's own stderr; with neither, nothing."""
    for stream in (sys.stderr, sys.__stderr__):
        if stream is None:
            continue
        try:
            faulthandler.register(SIGNAL, file=stream, all_threads=True, chain=False)
            return
        except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
            continue
