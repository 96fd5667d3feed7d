"""`ddpjob run --tensorboard`: TensorBoard on the job's event files
(`./.ddpjob/<name>/tensorboard`, a run per folder: `<name>/<start>` on the page), on a
loopback port, from the job's start until Ctrl-C: the curves stay open once it ends.

Users: `ddpjob run --tensorboard` and the tests that open the page in a browser
(tests/local/test_tensorboard_page.py). Its output goes to `tensorboard.log` in the
job's directory, not into the run's own lines; it dies with this process.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

from ddpjob.local import job_dir, ownership
from ddpjob.local.container import LocalRunError
from ddpjob.local.ports import free_port
from ddpjob.local.stop_process import stop_process

HOST = "127.0.0.1"
LOG_FILE = "tensorboard.log"
# Its first answer comes after it has imported itself and looked at the directory: a few
# seconds on a busy 2-core machine; a minute means it will not answer.
START_SECONDS = 90.0
RELOAD_SECONDS = 5  # how often it looks for new points while the job trains
# Points kept and drawn per curve: every logged step of a long job (TensorBoard keeps a
# sample of 1,000; its "0 = all" makes the page draw nothing: TensorBoard 2.21).
MAX_POINTS = 100_000
# The page opens on the training loss: its card pinned above the others (TensorBoard's
# Time Series dashboard reads its pinned cards from the address), which otherwise come in
# the tags' order, `epoch/` first and `train/loss` last, collapsed at the bottom.
PINNED = [{"plugin": "scalars", "tag": "train/loss"}]
WAIT_STEP = 0.2  # how often the wait for Ctrl-C looks at whether TensorBoard still runs
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # Ctrl-C, kill, the terminal closed


def logdir_flags(logdir: Path, name: str) -> list[str]:
    """The job's event files, its runs named `<name>/<folder>` on the page. `--logdir_spec`
    is a comma-separated list of `name:path`: a path with a comma is given as `--logdir`."""
    if not name or "," in str(logdir):
        return ["--logdir", str(logdir)]
    return ["--logdir_spec", f"{name}:{logdir}"]


def command(logdir: Path, port: int, name: str = "") -> list[str]:
    """TensorBoard's command line; `name`: the run's name on the page (the job's)."""
    return [
        sys.executable,
        "-m",
        "tensorboard.main",
        *logdir_flags(logdir, name),
        "--host",
        HOST,
        "--port",
        str(port),
        "--reload_interval",
        str(RELOAD_SECONDS),
        # Every point (up to MAX_POINTS), not TensorBoard's sample of 1,000 per curve.
        "--samples_per_plugin",
        f"scalars={MAX_POINTS}",
    ]


class TensorBoardServer:
    def __init__(self, logdir: Path, log_path: Path, name: str = ""):
        self.logdir, self.log_path, self.name = logdir, log_path, name
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    @property
    def page(self) -> str:
        """The address to open: the Time Series dashboard, the loss card pinned first."""
        query = urllib.parse.urlencode({"pinnedCards": json.dumps(PINNED, separators=(",", ":"))})
        return f"{self.url}?{query}#timeseries"

    def start(self, deadline_s: float = START_SECONDS) -> str:
        """Start it and wait for its page; its URL. LocalRunError when it cannot be had."""
        if importlib.util.find_spec("tensorboard") is None:
            raise LocalRunError("--tensorboard needs TensorBoard here: pip install 'ddpjob[trainer]' (or tensorboard)")
        self.logdir.mkdir(parents=True, exist_ok=True)  # it shows an empty page until the first point
        port = free_port(HOST)
        self.url = f"http://{HOST}:{port}/"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                command(self.logdir, port, self.name),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a terminal's Ctrl-C is ours to pass on, once
                preexec_fn=ownership.stop_with_parent,
            )
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise LocalRunError(f"TensorBoard exited ({self.proc.returncode}): {self._tail()}")
            with contextlib.suppress(OSError), urllib.request.urlopen(self.url + "data/environment", timeout=2):
                return self.url
            time.sleep(0.2)
        self.stop()
        raise LocalRunError(f"TensorBoard did not answer at {self.url} within {deadline_s:.0f}s: {self._tail()}")

    def _tail(self) -> str:
        try:
            return " ".join(self.log_path.read_text(errors="replace").splitlines()[-3:]) or "(no output)"
        except OSError:
            return "(no output)"

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            stop_process(proc, grace=10)

    def open(self, log, run: str) -> None:
        """Start it and say where (`log`: the run's line printer; `run`: this run's folder)."""
        self.start()
        log(f"TensorBoard: {self.page} (the job's curves, this run as {self.name}/{run}; it serves until Ctrl-C)")

    def serve_until_stopped(self, log) -> None:
        """After the job: keep serving until Ctrl-C (SIGINT, SIGTERM or SIGHUP), said in one
        line (`log`: the run's line printer); returns at once when TensorBoard has exited."""
        if self.proc is None:
            return
        stopped: list[int] = []
        old = {s: signal.signal(s, lambda signum, _f: stopped.append(signum)) for s in STOP_SIGNALS}
        try:
            log(f"the job is over; TensorBoard keeps serving its curves at {self.page} until Ctrl-C")
            while not stopped and self.proc.poll() is None:
                time.sleep(WAIT_STEP)
            if not stopped:
                log(f"TensorBoard exited ({self.proc.returncode}): {self._tail()}")
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)


def for_job(workdir: Path, name: str) -> TensorBoardServer:
    """TensorBoard for the job in `workdir` (not started): every run of it, one per folder."""
    return TensorBoardServer(workdir / job_dir.TENSORBOARD_DIR, workdir / LOG_FILE, name)
