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


def _stat(pid: str) -> tuple[str, int] | None:
    """A process's state letter and parent pid from /proc/<pid>/stat (None if gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name is in parentheses and may hold spaces or ')': split after the last.
    fields = stat[stat.rfind(b")") + 2 :].split()
    return fields[0].decode(), int(fields[1])


def pids_with_env(variable: str, prefix: str) -> list[int]:
    """Live processes whose env has `variable` starting with `prefix` (Linux /proc; none
    elsewhere). Descendants inherit the env: this finds a whole tree across sessions.

    A process in the middle of execve reads as an empty environ: the kernel has swapped
    in the new memory but not yet written where its env lies. Such a process counts when
    its parent does, or a child just started by a tagged process would be missed (seen on
    a busy machine: a Popen that had returned, its child not yet found)."""
    needle = f"{variable}={prefix}".encode()
    tagged: set[int] = set()
    pending: dict[int, int] = {}  # pid -> parent, for live processes with no env to read
    me = os.getpid()
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == me:
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    environ = f.read()
            except OSError:  # gone, or not ours
                continue
            if any(var.startswith(needle) for var in environ.split(b"\0")):
                tagged.add(int(entry))
            elif not environ and (stat := _stat(entry)) is not None and stat[0] not in "ZX":
                pending[int(entry)] = stat[1]  # zombies and the dead have no env either
    grew = True
    while grew:  # an exec'ing child of an exec'ing child: rare, but cheap to follow
        grew = False
        for pid, parent in list(pending.items()):
            if parent in tagged:
                tagged.add(pid)
                del pending[pid]
                grew = True
    return sorted(tagged)


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
