"""Leaving at once when a stop that was asked for is done.

A process that imported torch (and, through DDP, torch._dynamo) holds about 2,000 modules
and 300,000 objects; the interpreter's finalization of them takes 1-5 s on a busy 2-core
machine, and a stop waits for it twice in a row (the trainer's ranks, then torchrun).
That is most of the time Ctrl-C of `ddpjob run` took, and of a Pod's graceful stop. Once
the trainer has saved its checkpoint and torn down its process group, or torchrun has
stopped its workers, nothing is left that finalization would do: exit handlers run and
the standard streams are flushed here, then the process ends without unloading.

Used on the stop path only (train.py after a stop asked for, _torchrun.py after a
signal): a normal end is left as it was.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import NoReturn

from .private_api import run_exit_handlers


def exit_now(code: int) -> NoReturn:
    # atexit's own runner (the same call the interpreter makes at exit): logging's flush,
    # multiprocessing's reaping of daemonic children (DataLoader workers), torch's hooks.
    run_exit_handlers()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to say
            stream.flush()
    os._exit(code)


def exit_with(code: int, quick: tuple[int, ...]) -> NoReturn:
    """A program's end: at once for the codes of a stop (`quick`), as usual otherwise."""
    if code in quick:
        exit_now(code)
    sys.exit(code)
