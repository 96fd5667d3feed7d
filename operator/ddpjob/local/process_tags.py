"""A container's processes, found by the tag each inherits, as a cgroup holds them.

`ddpjob run`'s watchdog, the node's stop (and the dev cluster's kubelet through it) and
the tests find, and kill, a whole tree by it.
"""

from __future__ import annotations

import contextlib
import os
import signal

# Every process of a container inherits this variable. torchrun and ddpjob-launch start
# their children in sessions of their own, so a process-group kill would miss them; the
# tag finds the whole tree, as a container's cgroup would.
CONTAINER_TAG_ENV = "DDPJOB_CONTAINER"


def pids_with_env(variable: str, prefix: str) -> list[int]:
    """Live processes whose env has `variable` starting with `prefix` (Linux /proc; none
    elsewhere). Descendants inherit the env: this finds a whole tree across sessions."""
    needle = f"{variable}={prefix}".encode()
    found = []
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    environ = f.read()
            except OSError:  # gone, or not ours
                continue
            if any(var.startswith(needle) for var in environ.split(b"\0")):
                found.append(int(entry))
    return found


def kill_with_env(variable: str, prefix: str) -> int:
    pids = pids_with_env(variable, prefix)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return len(pids)


def tagged_pids(prefix: str) -> list[int]:
    """Processes of the containers whose tag starts with `prefix`."""
    return pids_with_env(CONTAINER_TAG_ENV, prefix)


def kill_tagged(prefix: str) -> int:
    return kill_with_env(CONTAINER_TAG_ENV, prefix)
