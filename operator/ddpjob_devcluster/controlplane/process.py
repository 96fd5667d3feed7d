"""One upstream binary run as a child process: its log file, its readiness, its stop.

Every process is started in a session of its own with PR_SET_PDEATHSIG, so it gets
SIGTERM (kube-apiserver: SIGKILL) when the process (thread) that started it dies: a
crashed test run or a killed demo leaves no etcd or API server behind. A binary that
exits during start, or is not ready by its deadline, is reported in one line naming its log.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import socket
import subprocess
import time
from collections.abc import Callable

from ddpjob.local.ownership import die_with_parent, stop_with_parent


class StartFailure(RuntimeError):
    """One line: which component, what happened, where its log is."""


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


class Component:
    """A started binary. `wait_ready(check)` polls `check` until it is true, the process
    exits, or the deadline passes."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        log_path: pathlib.Path,
        *,
        ports: tuple[int, ...] = (),
        env: dict[str, str] | None = None,
        kill_with_parent: bool = False,
    ):
        """`kill_with_parent`: SIGKILL, not SIGTERM, when the starter dies. kube-apiserver
        given SIGTERM as its etcd gets the same removes its Lease on the way out and waits
        on the dead etcd for good (seen: alive an hour after a killed test run)."""
        self.name, self.argv, self.log_path = name, argv, log_path
        for port in ports:
            if port_in_use(port):
                raise StartFailure(f"{name}: port {port} on 127.0.0.1 is already in use")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            try:
                self.popen = subprocess.Popen(
                    argv,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    start_new_session=True,
                    preexec_fn=die_with_parent if kill_with_parent else stop_with_parent,
                )
            except OSError as exc:
                raise StartFailure(f"{name}: cannot start {argv[0]}: {exc.strerror}") from None

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    def wait_ready(self, check: Callable[[], bool], deadline_seconds: float, what: str) -> None:
        deadline = time.monotonic() + deadline_seconds
        delay = 0.05
        while True:
            if not self.alive:
                raise StartFailure(
                    f"{self.name} exited with code {self.popen.returncode} during start "
                    f"({self.last_line()}); log: {self.log_path}"
                )
            with contextlib.suppress(Exception):
                if check():
                    return
            if time.monotonic() > deadline:
                self.stop()
                raise StartFailure(f"{self.name} was not {what} within {deadline_seconds:.0f} s; log: {self.log_path}")
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)  # back off: an API server takes seconds, etcd less

    def stop(self, grace: float = 10.0) -> int | None:
        """SIGTERM to its whole session, SIGKILL after `grace`."""
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(5)
        return self.popen.returncode

    def last_line(self) -> str:
        with contextlib.suppress(OSError):
            lines = [line for line in self.log_path.read_text(errors="replace").splitlines() if line.strip()]
            if lines:
                return lines[-1][:300]
        return "no output"
