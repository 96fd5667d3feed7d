"""The operator as its own process (`ddpjob operator`, exactly what the operator image
runs), started, stopped and, like the chart's Deployment, restarted when it ends on its own.

The operator exits by design when it loses its leader Lease (it cannot tell whether another
replica now leads) and leaves its restart to the kubelet, whose Deployment restarts it
after a back-off (10 s, doubling). A dev cluster that ran it once and never again had every
job's status freeze the first time a busy machine delayed a renewal past its deadline (a
system test waited 600 s for a phase that no one was left to write). `restart=True` is
that kubelet: an end that no `stop()` asked for is kept in `exits` and followed by a new
process after the back-off; `stop()` ends it for good until the next `start()`."""

from __future__ import annotations

import contextlib
import datetime
import os
import pathlib
import signal
import subprocess
import sys
import threading

from ddpjob.local.ownership import stop_with_parent

BIN = pathlib.Path(sys.executable).parent  # the venv's console scripts: ddpjob
# The kubelet's container restart back-off: 10 s, doubled at each restart, at most 5 min.
RESTART_BACKOFF = 10.0
RESTART_BACKOFF_MAX = 300.0


def _now() -> str:
    """The log's own time format (the operator's lines: `[2026-11-30 13:25:32,762]`), so a
    slow restart shows where its time went."""
    return datetime.datetime.now().isoformat(sep=" ", timespec="milliseconds")


def ddpjob_command() -> list[str]:
    script = BIN / "ddpjob"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from ddpjob.cli import main; sys.exit(main())"]


class OperatorProcess:
    """`ddpjob operator --standalone` against a kubeconfig; its output goes to a log file."""

    def __init__(
        self,
        kubeconfig: pathlib.Path,
        log_path: pathlib.Path,
        namespace: str | None = None,
        *,
        command: list[str] | None = None,
        env: dict[str, str] | None = None,
        restart: bool = False,
        restart_backoff: float = RESTART_BACKOFF,
    ):
        """command/env: what a chart's Deployment runs (`controlplane.install`); by
        default `ddpjob operator --standalone` on one namespace or all of them. restart:
        start it again, after `restart_backoff` (doubling), whenever it ends unasked."""
        self.kubeconfig, self.log_path, self.namespace = kubeconfig, log_path, namespace
        self.command, self.env = command, env
        self.restart, self.restart_backoff = restart, restart_backoff
        self.popen: subprocess.Popen | None = None
        self.starts = 0
        self.exits: list[int] = []  # the exit codes of the ends no stop() asked for
        self._lock = threading.Lock()
        self._stopped = threading.Event()

    def start(self) -> OperatorProcess:
        with self._lock:
            self._stopped.clear()
            popen = self._launch()
        if self.restart:
            threading.Thread(target=self._supervise, args=(popen,), name="operator-restarts", daemon=True).start()
        return self

    def _launch(self) -> subprocess.Popen:
        """Under the lock: a new process."""
        scope = ["--namespace", self.namespace] if self.namespace else ["--all-namespaces"]
        command = self.command or ["ddpjob", "operator", "--standalone", *scope]
        if command[0] == "ddpjob":
            command = [*ddpjob_command(), *command[1:]]
        env = self.env or dict(os.environ, KUBECONFIG=str(self.kubeconfig), PYTHONUNBUFFERED="1")
        self.starts += 1
        with open(self.log_path, "a", encoding="utf-8") as log:
            log.write(f"===== {_now()} operator start #{self.starts} =====\n")
            log.flush()
            self.popen = subprocess.Popen(
                command,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=stop_with_parent,
            )
        return self.popen

    def _current(self, popen: subprocess.Popen) -> bool:
        """Whether `popen` is still the process this one runs and no stop() came."""
        return not self._stopped.is_set() and self.popen is popen

    def _supervise(self, popen: subprocess.Popen) -> None:
        """The restarts of one start(), in one thread that outlives every process it starts:
        stop_with_parent's signal comes when the thread that started a process ends."""
        backoff = self.restart_backoff
        while True:
            code = popen.wait()
            with self._lock:
                if not self._current(popen):
                    return  # stopped, or started again: that start has its own thread
                self.exits.append(code)
                with contextlib.suppress(OSError), open(self.log_path, "a", encoding="utf-8") as log:
                    log.write(f"===== {_now()} operator exited {code} unasked; restarting in {backoff:.0f} s =====\n")
            if self._stopped.wait(backoff):
                return
            with self._lock:
                if not self._current(popen):
                    return
                popen = self._launch()
            backoff = min(backoff * 2, RESTART_BACKOFF_MAX)

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else None

    @property
    def returncode(self) -> int | None:
        """The exit code once it ended (None: not started, or running)."""
        return self.popen.returncode if self.popen is not None else None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> int | None:
        """Stop it (SIGTERM: kopf's graceful stop; SIGKILL: a crash); SIGKILL if it lingers.
        It is not restarted until the next start()."""
        with self._lock:
            self._stopped.set()
            popen = self.popen
        if popen is None:
            return None
        if popen.poll() is None:
            popen.send_signal(sig)
            try:
                popen.wait(timeout)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait(5)
        return popen.returncode

    def log_tail(self, lines: int = 60) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""
