"""The demo cluster's work directory: kubeconfig, logs, Pod output and volumes, for one
demo at a time, removed at the end.

A lock (`<dir>.lock`, the kernel's flock: it goes with the process however it ends)
stops a second demo on the same directory with a clear message instead of wiping the
first one's kubeconfig and Pods. A directory is wiped on start only if a demo made it
(it carries `MARKER`), and removed at the end unless kept.
"""

from __future__ import annotations

import pathlib
import shutil
from typing import IO

from ddpjob.local import pidlock

MARKER = ".ddpjob-demo-cluster"


class AlreadyRunning(SystemExit):
    pass


def lock(path: pathlib.Path) -> IO[str]:
    """Hold `<dir>.lock` until `finish()` or the process's end (another --workdir gives
    a second, independent cluster)."""
    try:
        return pidlock.acquire(path.parent / f"{path.name}.lock")
    except pidlock.LockHeld as held:
        raise AlreadyRunning(
            f"a demo cluster is already running in {path} (pid {held.holder}); use it "
            f"(export KUBECONFIG={path / 'kubeconfig'}), stop it with Ctrl-C, "
            f"or start another with --workdir DIR"
        ) from None


def prepare(path: pathlib.Path) -> None:
    if path.exists() and (path / MARKER).exists():
        shutil.rmtree(path)  # the last demo's Pods, logs and volumes
    elif path.exists() and any(path.iterdir()):
        raise SystemExit(f"{path} is not empty and was not made by this script; pick another --workdir")
    path.mkdir(parents=True, exist_ok=True)
    (path / MARKER).touch()


def finish(path: pathlib.Path, held: IO[str], *, keep: bool) -> str:
    """Remove the directory unless `keep`, then its lock file: last, and while still held,
    so a demo starting now never meets a half-removed directory. What was done, in words."""
    if keep:
        return f"the work directory is kept: {path}"
    shutil.rmtree(path, ignore_errors=True)
    pathlib.Path(held.name).unlink(missing_ok=True)
    pidlock.release(held)
    return f"removed {path}"
