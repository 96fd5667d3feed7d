"""Exit codes, as a container runtime reports them and the `ExitCode` restart policy reads them.

The one home of the "128+N" arithmetic: `ddpjob run` and the dev cluster's kubelet report
their containers' ends with it, and the trainer's launcher and torchrun wrapper exit with
it. Pure and dependency-free: the trainer image imports it.

- 0: success. 1-127: the program's own verdict (bad input, a bug): permanent.
- 128+N: ended by signal N (OOM kill, preemption, SIGTERM), or asked to stop: retryable.
- 128 with reason StartError: the command could not start (containerd's report).

Two ends are permanent under every restartPolicy, OnFailure included (`never_retried`,
read by job/restart_policy.py): a container that could not start (no restart installs a
missing executable), and exit 2 whose error line has argparse's form, `PROG: error: ...`
(argparse's verdict on a bad command line, and ddpjob-launch's and ddpjob-train's on bad
input): every attempt is given the same input. A user's own script that exits 2 for a
reason of its own, without that line, is left to its restartPolicy.
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
    if is_start_error(code, reason):
        return "the container could not start"
    if code == BAD_INPUT and error_line and _USAGE_ERROR_LINE.match(error_line):
        return "bad input (exit code 2)"
    return None
