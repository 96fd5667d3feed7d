"""Why a node's workers failed, in one line: the first rank's own exception
(`[rank0]: RuntimeError: boom at step 5`), left as the container's termination message
for the operator and `ddpjob run` (job/failure.py reads it as the failure's error line),
and said as the launcher's last log line.

Two sources, as torch.distributed.elastic gives them:
- the workers' error files: torchrun points each worker's TORCHELASTIC_ERROR_FILE into
  its log directory, and a program whose entry point is decorated with
  `torch.distributed.elastic.multiprocessing.errors.record` writes its exception there
  (`ProcessFailure.message`, read when torchrun raises `ChildFailedError`). The earliest
  written is the root cause (torchrun's own order is by whole seconds);
- the workers' stderr, read as it passes (`StderrTap`): a script without `@record` leaves
  no error file, but its traceback ends with its exception, each line prefixed with its
  rank by init_process_group's excepthook (ddpjob.error_lines). The first rank to print
  one is the cause: the others' tracebacks are the broken connections it left. Read
  here, whole, rather than from the 80 lines the kubelet keeps, which a node of 8 ranks'
  tracebacks overflows.

User: _torchrun.py, around torchrun's `main`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from collections.abc import Mapping
from typing import Any

from ddpjob import error_lines

from . import termination_message

# How long the end of the workers' output is waited for once torchrun has returned: a
# grandchild that kept the pipe open (and outlives its worker) is not waited on.
DRAIN_SECONDS = 2.0
CHUNK = 65536


class StderrTap:
    """This process's stderr (fd 2), and so its children's, through a pipe that a thread
    copies to the real stderr as it comes (bytes, unbuffered: progress bars and partial
    lines pass as they are) while reading its lines for their exceptions."""

    def __init__(self) -> None:
        self.reader = error_lines.Reader()
        self._partial = b""
        read_end, write_end = os.pipe()
        self._real = os.dup(2)
        os.dup2(write_end, 2)
        os.close(write_end)
        self._read_end = read_end
        self._thread = threading.Thread(target=self._copy, name="stderr-tap", daemon=True)
        self._thread.start()
        self._closed = False
        atexit.register(self.close)  # quick_exit.exit_now runs these too

    @classmethod
    def start(cls) -> StderrTap | None:
        """A tap, or None where stderr cannot be one (closed): the log's tail says it then."""
        try:
            os.fstat(2)  # open: else the pipe itself would take fd 2
            return cls()
        except OSError:
            return None

    def _copy(self) -> None:
        while True:
            try:
                chunk = os.read(self._read_end, CHUNK)
            except OSError:
                return
            if not chunk:
                break
            with contextlib.suppress(OSError):  # a closed stderr: nothing more to say
                os.write(self._real, chunk)
            self._lines(chunk)
        if self._partial:
            self.reader.feed(self._partial.decode("utf-8", "replace"))
        os.close(self._read_end)

    def _lines(self, chunk: bytes) -> None:
        *lines, rest = (self._partial + chunk).split(b"\n")
        for line in lines:
            self.reader.feed(line.decode("utf-8", "replace"))
        self._partial = rest[-error_lines.LINE_BYTES :]  # a line with no end is not kept whole

    def close(self) -> None:
        """Stderr back to what it was; what passed through is copied before this returns
        (within DRAIN_SECONDS)."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
        os.dup2(self._real, 2)  # closes this process's end of the pipe
        self._thread.join(DRAIN_SECONDS)
        os.close(self._real)


def _recorded(failures: Mapping[int, Any]) -> tuple[int, str] | None:
    """(rank, line) of the earliest error file a failed worker wrote, if any did."""
    found = []
    for rank, failure in failures.items():
        message = failure.message
        if isinstance(message, dict):  # torch's error file: {"message": "Type: text", "extraInfo": ...}
            message = message.get("message")
        if not isinstance(message, str) or not message.strip() or not os.path.isfile(str(failure.error_file)):
            continue
        try:
            written = os.stat(failure.error_file).st_mtime_ns
        except OSError:
            written = int(failure.timestamp) * 10**9
        found.append((written, rank, message.strip().splitlines()[0]))
    if not found:
        return None
    _, rank, line = min(found)
    return rank, line


def report(failures: Mapping[int, Any], tap: StderrTap | None) -> str | None:
    """Leave the root cause of torchrun's ChildFailedError (`failures`: global rank ->
    ProcessFailure) as the termination message and say it; the line, or None when
    neither an error file nor the workers' stderr says one."""
    if tap is not None:
        tap.close()  # everything the workers said is read
    # Only a traceback's exception or a crash's dump (faulthandler's, error_lines.py) from
    # the stream: an `error:` line anywhere in a long run is not why it ended (the
    # operator's reading of the log tail takes those).
    cause = _recorded(failures) or (tap.reader.failure() if tap is not None else None)
    if cause is None:
        return None
    line = error_lines.with_rank(*cause)
    termination_message.leave(line)
    print(f"ddpjob-launch: first to fail: {line}", file=sys.stderr, flush=True)
    return line
