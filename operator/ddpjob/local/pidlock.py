"""A lock file held by one process: `ddpjob run`'s job directory and the demo cluster's
work directory each take one, so a second run on the same directory stops with a clear
message instead of wiping the first one's files.

The lock is the kernel's (flock), so it goes away with the process however it ends; the
file holds the holder's pid for the message.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO


class LockHeld(Exception):
    def __init__(self, path: Path, holder: str):
        super().__init__(f"{path} is held by pid {holder}")
        self.path, self.holder = path, holder


def acquire(path: Path) -> IO[str]:
    """Take the lock at `path` (made if missing) and write this pid into it; keep the
    returned file open for as long as the lock is held. Raises `LockHeld`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    f = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - the open file is the lock: the caller holds it
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "unknown"
        f.close()
        raise LockHeld(path, holder) from None
    f.seek(0)
    f.truncate()
    f.write(str(os.getpid()))
    f.flush()
    return f


def release(f: IO[str]) -> None:
    fcntl.flock(f, fcntl.LOCK_UN)
    f.close()
