"""Exit codes, as a container runtime reports them and the `ExitCode` restart policy reads them.

The one home of the "128+N" arithmetic: `ddpjob run` and the dev cluster's kubelet report
their containers' ends with it, and the trainer's launcher and torchrun wrapper exit with
it. Pure and dependency-free: the trainer image imports it.

- 0: success. 1-127: the program's own verdict (bad input, a bug): permanent.
- 128+N: ended by signal N (OOM kill, preemption, SIGTERM), or asked to stop: retryable.
- 128 with reason StartError: the command could not start (containerd's report).

Two ends are permanent under every restartPolicy, OnFailure included (`never_retried`,
read by job/restart_policy.py): a container whose command could not start (no restart
installs a missing executable; the runtime's words say so: `executable file not found`,
`permission denied`, ...), and exit 2 whose error line has argparse's form, `PROG: error: ...`
(argparse's verdict on a bad command line, and ddpjob-launch's and ddpjob-train's on bad
input): every attempt is given the same input. A user's own script that exits 2 for a
reason of its own, without that line, is left to its restartPolicy, and so is a StartError
of the node's runtime itself (runc `unable to freeze` a cgroup on a node just rebooted, a
shim that failed): it says nothing of the command, and the next attempt may well start.
"""

from __future__ import annotations

import re
import signal

SIGNAL_BASE = 128
START_ERROR = SIGNAL_BASE  # containerd: a command that cannot start, reason StartError
START_ERROR_REASON = "StartError"
BAD_INPUT = 2  # bad flags, env, data or checkpoint: no retry can fix it
PREEMPTED = SIGNAL_BASE + signal.SIGTERM  # 143: asked to stop, saved a checkpoint, run me again
# 142: the gang did not come together in time (peers still waiting to be scheduled on a
# shared cluster, not a fault of the job): retryable, like a preemption.
RENDEZVOUS_TIMEOUT = SIGNAL_BASE + signal.SIGALRM
# How argparse ends a bad command line (ArgumentParser.error: `%(prog)s: error: %(message)s`,
# exit 2), and so do ddpjob-launch and ddpjob-train on bad input (their `log`); said by a
# rank of torch.distributed, it carries the rank (`[rank0]: `, error_lines.py).
_USAGE_ERROR_LINE = re.compile(r"^(\[rank\d+\]: )?[\w.\-]+: error: ")
# A StartError in containerd's or runc's words (the kubelet copies them into the status)...
_RUNTIME_WORDS = re.compile(r"OCI runtime|containerd|shim task", re.IGNORECASE)
# ...that names no command that cannot run (Go's exec errors: ENOENT, EACCES, ENOEXEC,
# ENOTDIR; a working directory that is not there) is the node's fault, not the job's.
_COMMAND_CANNOT_RUN = re.compile(
    r"executable file not found|no such file or directory|permission denied|exec format error|not a directory",
    re.IGNORECASE,
)


def of_signal(signum: int) -> int:
    """The exit code of a process ended by signal `signum`."""
    return SIGNAL_BASE + int(signum)


def of_returncode(returncode: int) -> int:
    """Popen's and multiprocessing's -N (killed by signal N) as a runtime reports it: 128+N."""
    return of_signal(-returncode) if returncode < 0 else returncode


def is_signal(code: int) -> bool:
    """Whether an exit code says "ended by a signal (or asked to stop)": retryable."""
    return code >= SIGNAL_BASE


def is_start_error(code: int | None, reason: str | None) -> bool:
    """Whether a container's end says its command could not start (containerd's report)."""
    return code == START_ERROR and reason == START_ERROR_REASON


def never_retried(code: int | None, reason: str | None, error_line: str | None) -> str | None:
    """Why no restartPolicy retries this end (its words for a status message), or None when
    the policy decides. `error_line`: the first error line of the container's log tail."""
    if is_start_error(code, reason) and not runtime_fault(error_line):
        return "the container could not start"
    if code == BAD_INPUT and error_line and _USAGE_ERROR_LINE.match(error_line):
        return "bad input (exit code 2)"
    return None


def runtime_fault(error_line: str | None) -> bool:
    """Whether a StartError's words are the node's runtime failing (runc `unable to freeze`
    a cgroup, a shim that died) rather than a command that cannot run: containerd's or
    runc's words that name no missing, unreadable or unrunnable file. `ddpjob run`'s and the
    development kubelet's start errors (a command not installed) are never one."""
    line = error_line or ""
    return bool(_RUNTIME_WORDS.search(line)) and not _COMMAND_CANNOT_RUN.search(line)
