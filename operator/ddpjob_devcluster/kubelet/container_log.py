"""One container's log file as a client of `kubectl logs` reads it, served by the node's
kubelet server (controlplane/kubelet_server.py, where the real API server proxies
`pods/{name}/log`): what is there first (`tailLines` whole lines), then, when following,
whole lines as they come, and the last partial line once the container has exited.

The process kubelet writes each container's output to its `log_path`, each line
prefixed `[pod] ` (the local runner's format); a runtime's log file has the lines as the
container wrote them, so the prefix is taken off here.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable


class LogReader:
    def __init__(self, pod: str, path: pathlib.Path, running: Callable[[], bool], follow: bool):
        self.pod, self.path, self.running, self.follow = pod, path, running, follow
        self.offset = 0

    def head(self, tail: int | None) -> bytes:
        data = self.path.read_bytes() if self.path.exists() else b""
        # Only whole lines are sent while following; the rest waits for its newline.
        complete = data if not self.follow else data[: data.rfind(b"\n") + 1]
        self.offset = len(complete)
        return unprefixed(self.pod, whole_lines_tail(complete, tail))

    def next(self) -> bytes | None:
        """What came since (b'': nothing yet, poll again); None once the container has
        exited and everything it wrote has been read."""
        was_running = self.running()
        fresh = b""
        if self.path.exists():
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                fresh = f.read()
        if fresh and (b"\n" in fresh or not was_running):
            if was_running:
                fresh = fresh[: fresh.rfind(b"\n") + 1]
            self.offset += len(fresh)
            return unprefixed(self.pod, fresh)
        return None if not was_running else b""


def whole_lines_tail(data: bytes, lines: int | None) -> bytes:
    """The last `lines` lines of `data` (all of it for None, nothing for 0 or less)."""
    if lines is None:
        return data
    if lines <= 0:
        return b""
    return b"".join(data.splitlines(keepends=True)[-lines:])


def unprefixed(pod: str, data: bytes) -> bytes:
    """The lines as the container wrote them, without the kubelet's `[pod] ` prefix."""
    prefix = f"[{pod}] ".encode()
    return b"".join(line[len(prefix) :] if line.startswith(prefix) else line for line in data.splitlines(keepends=True))
