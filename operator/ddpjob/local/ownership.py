"""`ddpjob run` owns its processes, even when it dies, and owns its job directory.

- Each container runs in a process group (session) of its own, so a Ctrl-C in the
  terminal reaches the runner only, and the runner stops every group in order
  (SIGTERM, grace, SIGKILL) on SIGINT, SIGTERM and SIGHUP (the terminal closed).
- If the runner itself dies (SIGKILL, OOM kill), nothing of it can run any more. Two
  things remain that were set up while it lived:
  * each container's main process gets PR_SET_PDEATHSIG = SIGKILL (Linux), so it dies
    with the runner;
  * a watchdog process, in a session of its own, waits on a pipe only the runner holds
    open; when the pipe closes it kills every process carrying the run's container tag
    (which all descendants inherit, even those that started sessions of their own, such
    as torchrun's workers), the way a container runtime kills a cgroup.
- A lock (flock) on the job's directory refuses a second concurrent run of the same
  job, which would share and overwrite its checkpoints.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

from ddpjob.local import pidlock
from ddpjob.local.container import LocalRunError
from ddpjob.local.process_tags import CONTAINER_TAG_ENV

PR_SET_PDEATHSIG = 1
LOCK_FILE = ".ddpjob-run.lock"

_WATCHDOG = """
import os, sys, time
from ddpjob.local.process_tags import kill_with_env
sys.stdin.buffer.read()  # returns when the runner is gone (or closed the pipe)
for _ in range(5):  # a process forking while we kill is caught by the next sweep
    if not kill_with_env(sys.argv[1], sys.argv[2]):
        break
    time.sleep(0.2)
"""


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


# Loaded here, in the parent: between fork and exec only the prctl call itself may run.
_LIBC = _libc()


def die_with_parent() -> None:
    """In a child before exec: SIGKILL it when the thread that started it ends."""
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def stop_with_parent() -> None:
    """In a child before exec: SIGTERM it when the thread that started it ends, for a
    server that cleans up given the chance (etcd, kube-apiserver, the dev cluster's operator)."""
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class Watchdog:
    """Kills every process tagged `tag_prefix` once this process is gone."""

    def __init__(self, tag_prefix: str):
        read_end, write_end = os.pipe()
        self._write_end: int | None = write_end
        env = dict(os.environ)  # the watchdog imports ddpjob as this process did
        env.pop(CONTAINER_TAG_ENV, None)  # never a target of its own sweep
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, CONTAINER_TAG_ENV, tag_prefix],
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
        os.close(read_end)
        os.set_inheritable(write_end, False)  # the containers must not keep it open

    def close(self) -> None:
        """A clean end: the runner already stopped everything; the sweep finds nothing."""
        if self._write_end is not None:
            os.close(self._write_end)
            self._write_end = None
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class JobLock:
    """An exclusive flock on the job's directory, held for the run."""

    def __init__(self, workdir: Path, job_name: str):
        self.path = workdir / LOCK_FILE
        self.job_name = job_name
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        try:
            self._file = pidlock.acquire(self.path)
        except pidlock.LockHeld as held:
            raise LocalRunError(
                f"job {self.job_name!r} is already running here (pid {held.holder}, lock "
                f"{self.path}); wait for it, or give this run another --workdir"
            ) from None

    def release(self) -> None:
        if self._file is not None:
            pidlock.release(self._file)
            self._file = None
