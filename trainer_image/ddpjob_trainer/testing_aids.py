"""ddpjob-train's testing aids, each switched on by one variable of the environment (tests
and benchmarks set them in a job's `env`): failures and timings on demand, in the very
trainer a job runs."""

from __future__ import annotations

import os
import signal
import sys
import time

# SIGKILL rank 0 right after epoch N's checkpoint, like a node dying there.
KILL_AFTER_EPOCH = "DDPJOB_TEST_KILL_AFTER_EPOCH"
# In the first attempt only, global rank DDPJOB_TEST_HANG_RANK (default 1) stops before
# optimizer step N without exiting, like a deadlocked data loader; it goes on only when
# asked to stop (SIGTERM). Its peers, stuck in that step's collective by then for longer
# than stop.py allows, exit at the stop without a checkpoint: the job resumes from
# its last one.
HANG_AT_STEP, HANG_RANK = "DDPJOB_TEST_HANG_AT_STEP", "DDPJOB_TEST_HANG_RANK"
# Every optimizer step takes at least this long (0-10 s), so a test's job outlasts its
# resizes on a fast machine as on a slow one; once the file STEP_SECONDS_UNTIL names exists
# (the test has seen what it waited for), the steps run at full speed to the job's end.
STEP_SECONDS, STEP_SECONDS_UNTIL = "DDPJOB_TEST_STEP_SECONDS", "DDPJOB_TEST_STEP_SECONDS_UNTIL"


def step_seconds() -> float:
    return min(max(float(os.environ.get(STEP_SECONDS) or 0), 0.0), 10.0)


def slow_step(seconds: float) -> None:
    """The slow step's sleep, unless the test released the job (STEP_SECONDS_UNTIL)."""
    until = os.environ.get(STEP_SECONDS_UNTIL)
    if not (until and os.path.exists(until)):
        time.sleep(seconds)


def hang_step(restart_count: int, rank: int) -> int | None:
    at = os.environ.get(HANG_AT_STEP)
    if not at or restart_count != 0 or str(rank) != os.environ.get(HANG_RANK, "1"):
        return None
    return int(at)


def hang(rank: int, step: int, stopping) -> None:
    """Block before `step` until `stopping()` (a SIGTERM was received)."""
    print(
        f"ddpjob-train: testing aid: rank {rank} hangs before step {step} ({HANG_AT_STEP})", file=sys.stderr, flush=True
    )
    while not stopping():
        time.sleep(0.1)


def after_epoch(epoch: int, is_main: bool) -> None:
    if os.environ.get(KILL_AFTER_EPOCH) == str(epoch) and is_main:
        os.kill(os.getpid(), signal.SIGKILL)
