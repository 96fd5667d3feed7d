"""Exit codes, as a container runtime reports them and the `ExitCode` restart policy reads them.

The one home of the "128+N" arithmetic: `ddpjob run` and the dev cluster's kubelet report
their containers' ends with it, and the trainer's launcher and torchrun wrapper exit with
it. Pure and dependency-free: the trainer image imports it.

- 0: success. 1-127: the program's own verdict (bad input, a bug): permanent.
- 128+N: ended by signal N (OOM kill, preemption, SIGTERM), or asked to stop: retryable.
- 128 with reason StartError: the command could not start (containerd's report).
"""

from __future__ import annotations

import signal

SIGNAL_BASE = 128
START_ERROR = SIGNAL_BASE  # containerd: a command that cannot start, reason StartError
BAD_INPUT = 2  # bad flags, env, data or checkpoint: no retry can fix it
PREEMPTED = SIGNAL_BASE + signal.SIGTERM  # 143: asked to stop, saved a checkpoint, run me again
# 142: the gang did not come together in time (peers still waiting to be scheduled on a
# shared cluster, not a fault of the job): retryable, like a preemption.
RENDEZVOUS_TIMEOUT = SIGNAL_BASE + signal.SIGALRM


def of_signal(signum: int) -> int:
    """The exit code of a process ended by signal `signum`."""
    return SIGNAL_BASE + int(signum)


def of_returncode(returncode: int) -> int:
    """Popen's and multiprocessing's -N (killed by signal N) as a runtime reports it: 128+N."""
    return of_signal(-returncode) if returncode < 0 else returncode


def is_signal(code: int) -> bool:
    """Whether an exit code says "ended by a signal (or asked to stop)": retryable."""
    return code >= SIGNAL_BASE
