"""`ddpjob run` of one job in the background: the Python client's local backend
(`LocalProcessBackendConfig`) runs a job on this machine with the very runner the command
uses, in a process of its own, and reads what it says.

- Started as `python -m ddpjob.cli run FILE --workdir DIR`, its output (the runner's
  `[ddpjob] ...` lines and each Pod's `[pod] ...` lines) into a file; in a session of its
  own (an interrupted wait in the caller leaves the job running, as on a cluster), and
  SIGTERMed if the thread that started it ends (the runner then stops its Pods in order;
  its watchdog covers a runner that is killed).
- Its phase, while it runs, is the runner's last `[ddpjob] phase P: message` line; once it
  ended, the status the runner wrote (`status.yaml` in DIR, if this run wrote it), else
  what its exit status and last error line say (the runner's `[ddpjob] error: ...`, or
  the command's own refusal of a field or a file, the lines no Pod can write: each Pod
  line starts with `[pod]`).
- `stop()` is SIGTERM, then SIGKILL after `STOP_GRACE` seconds.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddpjob.local import job_dir, ownership

PHASE_LINE = re.compile(r"\[ddpjob\] phase (\w+): ?(.*)")
ERROR_LINE = re.compile(r"\[ddpjob\] error: (.*)")
# The runner stops each container with 10 s of grace; then its own exit.
STOP_GRACE = 30.0
# A line of the output longer than this (a Pod that never writes a newline) is passed on
# in pieces: what is held in memory stays bounded.
MAX_LINE_BYTES = 1 << 20
FOLLOW_POLL = 0.2
FINISHED = ("Succeeded", "Failed")
# From the runner's last phase line to its exit: its summary and status file are written.
END_WAIT = 30.0
INTERRUPTED_CODE = 130


@dataclass
class Said:
    """What the runner said so far: its phase lines, in order, and its last error line."""

    phases: list[tuple[str, str]] = field(default_factory=list)
    error: str | None = None


class LineReader:
    """The whole lines of a file that grows, from where the last read stopped. A line
    longer than MAX_LINE_BYTES is cut there and the rest of it skipped, so memory stays
    bounded and no tail of a long line is ever read as a line of its own."""

    def __init__(self, path: Path):
        self.path, self.offset, self.pending, self.skipping = path, 0, b"", False

    def new_lines(self) -> Iterator[str]:
        with self.path.open("rb") as f:
            f.seek(self.offset)
            while chunk := f.read(1 << 16):
                self.offset += len(chunk)
                *complete, self.pending = (self.pending + chunk).split(b"\n")
                for raw in complete:
                    if self.skipping:  # the end of a line already cut
                        self.skipping = False
                        continue
                    yield raw.decode(errors="replace")
                if len(self.pending) > MAX_LINE_BYTES:
                    if not self.skipping:
                        yield self.pending[:MAX_LINE_BYTES].decode(errors="replace")
                    self.pending, self.skipping = b"", True


class BackgroundRun:
    def __init__(self, job_file: Path, workdir: Path, output: Path, allow_env: bool = False):
        self.job_file, self.workdir, self.output, self.allow_env = job_file, workdir, output, allow_env
        self.popen: subprocess.Popen[bytes] | None = None
        self.started_ns = 0
        self._said, self._reader = Said(), LineReader(output)

    def start(self) -> None:
        argv = [sys.executable, "-m", "ddpjob.cli", "run", str(self.job_file), "--workdir", str(self.workdir)]
        self.started_ns = time.time_ns()
        with self.output.open("wb") as out:
            self.popen = subprocess.Popen(
                argv + (["--allow-env"] if self.allow_env else []),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=ownership.stop_with_parent,
            )

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def status(self) -> dict[str, Any]:
        """The job's status as the runner knows it now (a DDPJob's `status`; empty while
        it has none, as a job the operator has not seen yet)."""
        said = self._said_so_far()
        last = said.phases[-1] if said.phases else None
        if last and last[0] in FINISHED and self.popen is not None:
            # The runner says the end, then writes the whole status and exits: read that.
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(END_WAIT)
        code = self.popen.poll() if self.popen is not None else None
        if code is None:
            return {"phase": last[0], "message": last[1]} if last else {}
        final = self._written_status()
        if final is not None:
            return final
        if code == 0:  # nothing to run (it Succeeded here before): the runner says why and exits 0
            return {"phase": "Succeeded", "message": last[1] if last else ""}
        if code == INTERRUPTED_CODE and not said.error:
            return {"phase": "Failed", "message": "interrupted"}
        return {"phase": "Failed", "message": said.error or (last[1] if last else "") or f"ddpjob run exited {code}"}

    def phases(self) -> list[tuple[str, str]]:
        """Each phase the runner entered, with its message, in order."""
        return list(self._said_so_far().phases)

    def lines(self, follow: bool, reader: LineReader | None = None) -> Iterator[str]:
        """The output's lines (from the start, or from where `reader` stopped); `follow`
        waits for more until the run ended."""
        reader, last_pass = reader or LineReader(self.output), False
        while True:
            yield from reader.new_lines()
            if not follow or last_pass:
                return
            if not self.running:
                last_pass = True  # what it wrote before it ended
                continue
            time.sleep(FOLLOW_POLL)

    def stop(self) -> None:
        """SIGTERM (the runner stops every Pod in order), then SIGKILL after STOP_GRACE."""
        if self.popen is None or self.popen.poll() is not None:
            return
        self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(STOP_GRACE)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(STOP_GRACE)

    def _said_so_far(self) -> Said:
        for line in self._reader.new_lines():
            if match := PHASE_LINE.fullmatch(line):
                self._said.phases.append((match.group(1), match.group(2)))
            elif match := ERROR_LINE.fullmatch(line):
                self._said.error = match.group(1)
            elif line.strip() and not line.startswith("["):  # the command's own refusal (a field, a file)
                self._said.error = line
        return self._said

    def _written_status(self) -> dict[str, Any] | None:
        """The status this run wrote at its end; None where it wrote none (one left by an
        earlier run of the job is older than this run's start)."""
        path = self.workdir / job_dir.STATUS_FILE
        try:
            if path.stat().st_mtime_ns < self.started_ns:
                return None
        except OSError:
            return None
        return job_dir.previous_run(self.workdir)
