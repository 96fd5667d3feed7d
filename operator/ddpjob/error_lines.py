"""The line of a log that says why a program failed, and what makes two such lines "the
same failure".

A Python program that dies of an exception prints a traceback whose last line is the
exception (`RuntimeError: boom at step 5`). Under torch.distributed every line of it
carries the rank (`[rank0]: `: init_process_group's excepthook), and a gang's other ranks
follow with their own tracebacks (`Connection closed by peer`), then torchrun says
`failed (exitcode: 1) local_rank: 0 (pid: 1866)` with a time and a pid. The cause is the
first rank's exception, said with its rank: `[rank0]: RuntimeError: boom at step 5`.

A process that crashed in native code (a segfault in an extension, an abort) raised
nothing: with faulthandler on (ddpjob-launch turns it on for every Python process it
starts: stacks.py) it printed `Fatal Python error: Segmentation fault` and each thread's
stack, the crashing one under `Current thread`. Its line is the fatal error with where
that thread was: `Fatal Python error: Segmentation fault: in string_at
(ctypes/__init__.py:519), from crash_here (/app/train.py:5)`, the innermost frame and,
when that is in a library, the innermost one of the program's own.

Users: `ddpjob.job.failure` (a failed container's termination message: its log tail, or
the line ddpjob-launch left), `exit_codes.never_retried` (argparse's line, with its rank)
and the trainer's `root_cause` (reads the workers' stderr as it passes). Pure and
dependency-free: the trainer image imports it.
"""

from __future__ import annotations

import re

LIMIT = 300  # characters of a line kept (status messages and Events quote it)
# torch.distributed's excepthook prefix (distributed_c10d: f"[rank{rank}]: "), on every
# line a rank prints after init_process_group raised through it.
_RANK_PREFIX = re.compile(r"^\[rank(\d{1,7})\]: ?")
_TRACEBACK = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s+File "')
# How a traceback ends: the exception's (qualified) class name, then its message.
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(: |:?$)")
# A line that says what went wrong without a traceback: a Python exception's form
# (`ValueError: ...`), or a program's `error:`/`fatal:`/`panic:`.
_ERROR_LINE = re.compile(r"^[\w.]*(Error|Exception)\b(:|$)|\b(error|fatal|panic)\b\s*[:!]", re.IGNORECASE)
_FATAL = "Fatal Python error: "
_CURRENT_THREAD = re.compile(r"^Current thread 0x[0-9a-fA-F]+ ")
_FRAME_AT = re.compile(r'^\s+File "(?P<path>[^"]*)", line (?P<line>\d+) in (?P<func>.*)$')
# Frames that are not the program's own: the standard library, torch and numpy.
_LIBRARY = re.compile(r"/lib/python3\.\d+/(?!(site|dist)-packages/)|/(site|dist)-packages/(torch|numpy)/")
SOURCES = 64  # ranks followed at once by a Reader; more are not told apart
LINE_BYTES = 4096  # of one line read; the rest of a longer one is not looked at


def split_rank(line: str) -> tuple[int | None, str]:
    """(the rank of torch's `[rankN]: ` prefix or None, the line without it)."""
    m = _RANK_PREFIX.match(line)
    return (int(m.group(1)), line[m.end() :]) if m else (None, line)


def with_rank(rank: int | None, line: str) -> str:
    """A line as it is said: with the prefix of its rank, as torch printed it."""
    return (f"[rank{rank}]: {line}" if rank is not None else line)[:LIMIT]


class Reader:
    """Reads a log line by line, in order, and keeps each rank's exception: the last line of
    its last traceback (a handled one logged earlier, a chained one's first, are not why it
    ended). `exception()` is the one said first: the rank that failed first."""

    def __init__(self) -> None:
        self._in_traceback: dict[int | None, bool] = {}
        self._exception: dict[int | None, tuple[int, str]] = {}  # rank -> (line number, line)
        self._first_error: tuple[int | None, str] | None = None
        self._crash: _Crash | None = None  # the first process that crashed
        self._count = 0
        self.last: tuple[int | None, str] | None = None

    def feed(self, raw: str) -> None:
        rank, line = split_rank(raw.rstrip("\r\n")[:LINE_BYTES])
        if not line.strip():
            return
        self._count += 1
        self.last = (rank, line.strip())
        if (self._crash is None and line.startswith(_FATAL)) or (self._crash is not None and self._crash.reading):
            self._read_crash(rank, line)
        if rank not in self._in_traceback and len(self._in_traceback) >= SOURCES:
            return
        indented = line[:1].isspace()
        if line.strip() == _TRACEBACK or _FRAME.match(line) or (indented and rank not in self._in_traceback):
            # A frame without its header, or a first line indented: a tail that begins
            # inside a traceback (its exception's form is checked below).
            self._in_traceback[rank] = True
        elif self._in_traceback.get(rank) and not indented:
            # The first line back at the left margin ends the traceback: its exception.
            self._in_traceback[rank] = False
            if _EXCEPTION.match(line):
                self._exception[rank] = (self._count, line.strip())
            elif self._first_error is None and _ERROR_LINE.search(line):
                self._first_error = (rank, line.strip())
        else:
            self._in_traceback.setdefault(rank, False)
            if self._first_error is None and _ERROR_LINE.search(line):
                self._first_error = (rank, line.strip())

    def _read_crash(self, rank: int | None, line: str) -> None:
        crash = self._crash
        if crash is None:
            self._crash = _Crash(self._count, rank, line.strip())
        elif _CURRENT_THREAD.match(line):
            crash.current = True
        elif line.startswith("Thread 0x"):
            crash.threads += 1
        elif crash.current and (frame := _FRAME_AT.match(line)):
            crash.frames.append(frame)
        elif crash.current or not (line[:1].isspace() or line.startswith("Thread 0x")):
            crash.reading = False  # the crashing thread's stack is over (or never came)

    def crash(self) -> tuple[int | None, str] | None:
        """(rank, line) of the first crash read (faulthandler's dump); None when none."""
        return (self._crash.rank, self._crash.line()) if self._crash is not None else None

    def failure(self) -> tuple[int | None, str] | None:
        """(rank, line): whichever came first of the first rank's exception and a crash."""
        exception = self.exception()
        if self._crash is None:
            return exception
        if exception is not None and min(n for n, _ in self._exception.values()) < self._crash.count:
            return exception
        return self.crash()

    def exception(self) -> tuple[int | None, str] | None:
        """(rank, line) of the first rank's exception; None when no traceback was read."""
        if not self._exception:
            return None
        rank, (_, line) = min(self._exception.items(), key=lambda item: item[1][0])
        return rank, line

    def cause(self) -> tuple[int | None, str] | None:
        """(rank, line): the first rank's exception or crash, else the first error line, else None."""
        return self.failure() or self._first_error


class _Crash:
    """faulthandler's dump of a crashed process, as it is read."""

    def __init__(self, count: int, rank: int | None, fatal: str):
        self.count, self.rank, self.fatal = count, rank, fatal
        self.current = False  # within the crashing thread's stack
        self.threads = 0  # Python's other threads, dumped before it
        self.reading = True
        self.frames: list[re.Match] = []

    def line(self) -> str:
        if not self.frames:
            # Python's threads dumped, none of them the crashing one: a native library's own
            # thread crashed (gloo's, a TCPStore's), or one while the interpreter finalized.
            return f"{self.fatal}: in a native thread" if self.threads and not self.current else self.fatal
        where = [self.frames[0]]
        own = next((f for f in self.frames if not _LIBRARY.search(f["path"])), None)
        if own is not None and own is not where[0]:
            where.append(own)
        said = ", from ".join(f"{f['func']} ({_short(f['path'])}:{f['line']})" for f in where)
        return f"{self.fatal}: in {said}"


def _short(path: str) -> str:
    """A library's file by its package path (`ctypes/__init__.py`), a program's in full."""
    m = re.search(r"/lib/python3\.\d+/(?:(?:site|dist)-packages/)?(.+)$", path)
    return m.group(1) if m else path


def is_crash(line: str) -> bool:
    """Whether a failure's line is a crash's (faulthandler's fatal error, with its rank or not)."""
    return split_rank(line)[1].startswith(_FATAL)


def error_line(message: str | None) -> str | None:
    """The line of a log tail that says why it failed (`Reader.cause`), else its last line;
    None without one."""
    reader = Reader()
    for line in (message or "").splitlines():
        reader.feed(line)
    found = reader.cause() or reader.last
    return with_rank(*found) if found else None


# A line that blames the network, a peer or a wait (torch.distributed's own errors, a
# connection, a timeout): a failure another attempt may not meet.
_TRANSIENT = re.compile(
    r"Dist(Network|Store|Backend)Error|\b(connection (closed|reset|refused|aborted)|timed? ?out|unreachable)\b",
    re.IGNORECASE,
)


def transient(line: str) -> bool:
    """Whether a failure's line blames the network, a peer or a wait."""
    return bool(_TRANSIENT.search(line))


# What differs between two runs of the same failure: times, process ids, addresses and
# ports, hexadecimal ids (object addresses, uuids, hashes), temporary names.
_VOLATILE = (
    # glog's head (torchrun's own lines): severity, date, time, thread id.
    (re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d(\.\d+)? +\d+ "), ""),
    (re.compile(r"\b\d{4}-\d\d-\d\d[T _]\d\d:\d\d(:\d\d)?([.,]\d+)?(Z|[+-]\d\d:?\d\d)?"), "<time>"),
    (re.compile(r"\b\d\d:\d\d:\d\d([.,]\d+)?"), "<time>"),
    (re.compile(r"\b(pid|PID|process|Process|thread|tid)( id)?([:= ]+)\d+"), r"\1\2\3<n>"),
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<id>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b"), "<hex>"),
    (re.compile(r"\[[0-9a-fA-F:.]*:[0-9a-fA-F:.]*\](:\d+)?"), "<address>"),  # [::1]:29500
    (re.compile(r"\b\d{1,3}(\.\d{1,3}){3}(:\d+)?\b"), "<address>"),
    (re.compile(r"(?<=[\w\]])(:)\d{2,5}\b(?![.:]\d)"), r"\1<port>"),  # host:29500
    (re.compile(r"\b(tmp|temp)[\w-]{6,}"), r"\1<name>"),  # tempfile.mkdtemp's names
)


def same_failure_key(line: str) -> str:
    """The line with what changes from one run of the same failure to the next taken out:
    two attempts that end with equal keys failed the same way."""
    rank, line = split_rank(line)
    for pattern, replacement in _VOLATILE:
        line = pattern.sub(replacement, line)
    return with_rank(rank, line)
