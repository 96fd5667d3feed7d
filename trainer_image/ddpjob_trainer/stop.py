"""A stop asked for (SIGTERM, SIGINT: the kubelet, a gang restart, Ctrl-C of `ddpjob run`),
and the stop that cannot reach a step's end: the step is stuck on a peer that neither
answers nor closes its connections (its node cut off the network, or frozen).

A stop only sets a flag (StopRequest); the loop reads it at the next step boundary, where
the ranks vote, save and exit 143. A rank blocked in a collective never gets there: gloo waits
inside C++, where Python's handler does not even run, until the group's timeout (30 minutes
by default). The kubelet then waits out the Pod's whole termination grace and kills it,
nothing saved either way. On the kind tier a partition cost a rigid job that grace twice:
the healthy node's Pod held the gang restart up by 30 s, and the cut-off Pod ran on 30 s more
once the partition healed.

The interpreter's C-level signal handler writes each signal to its wakeup fd whatever the
main thread is doing; a thread here reads it. When a stop comes while the step in flight has
lasted `FACTOR` times the usual step (the median of the recent ones), and at least `FLOOR_S`,
the step is taken as stuck: the process says so and exits 143 at once. The job's last
checkpoint stands; what is lost is what the kubelet's SIGKILL would have lost. A save's
collectives are judged as a step (its RNG gather once waited on a frozen peer with no step in
flight), rank 0's write never is (not a wait on a peer, however long); and nothing before
`MIN_STEPS` steps have ended. The median, not the slowest: the first steps of a group warm
up (gloo connects its pairs, the allocator grows, torch.compile compiles), and on the kind
tier one of them took long enough that ten times it outlasted the kubelet's grace.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import NamedTuple

from ddpjob import exit_codes

FLOOR_S = 10.0  # a stuck step has waited at least this long ...
FACTOR = 10.0  # ... and this many times the median of
RECENT = 50  # the last steps that ended,
MIN_STEPS = 3  # once this many have
POLL_S = 0.25  # how often a stop not yet stuck looks again
STOPS = (signal.SIGTERM, signal.SIGINT)


class Stuck(NamedTuple):
    step: int  # the optimizer step in flight
    age: float  # seconds it has lasted (a save's time left out)
    limit: float  # seconds after which it is taken as stuck
    usual: float  # the median of the recent steps' lengths


class StepClock:
    """The step in flight's start and the recent steps' lengths. The training loop's cost is
    two clock reads and an append a step; the watching thread reads plain attributes."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.started: float | None = None  # the step in flight's start; None between steps
        self.step = 0
        self.recent: deque[float] = deque(maxlen=RECENT)
        self.usual: float | None = None  # the median of recent, kept so that no other thread iterates it

    def begin(self, step: int) -> None:
        self.step, self.started = step, self.clock()

    def end(self) -> None:
        started, self.started = self.started, None
        if started is not None:
            self.recent.append(self.clock() - started)
            if len(self.recent) >= MIN_STEPS:
                self.usual = sorted(self.recent)[len(self.recent) // 2]

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        """Collectives outside a step (a checkpoint's at an epoch's end or on a stop): they
        wait on the peers as a step does and are judged the same, but are no step's length."""
        if self.started is not None:  # inside a step, whose own clock runs
            yield
            return
        self.started = self.clock()
        try:
            yield
        finally:
            self.started = None

    @contextlib.contextmanager
    def saving(self) -> Iterator[None]:
        """Rank 0 writing a checkpoint: never taken as stuck, and not counted in its step's
        length (its collectives are: a peer frozen there is as silent as in a step)."""
        started, self.started = self.started, None
        before = self.clock()
        try:
            yield
        finally:
            if started is not None:
                self.started = started + (self.clock() - before)

    def stuck(self, now: float | None = None) -> Stuck | None:
        """The step in flight as the watcher judges it; None between steps, during a save,
        or before MIN_STEPS steps ended."""
        started, usual = self.started, self.usual
        if started is None or usual is None:
            return None
        age = (self.clock() if now is None else now) - started
        return Stuck(self.step, age, max(FLOOR_S, FACTOR * usual), usual)


class StopRequest:
    """The stop signal received (0: none), read by the loop at each step boundary; a step
    stuck on a silent peer never ends, and then the stop ends the process, timed by `clock`."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.signum = 0
        self.clock = StepClock()
        for sig in STOPS:
            signal.signal(sig, self._handle)
        watch(self.clock, say)

    def _handle(self, signum: int, _frame: object) -> None:
        self.signum = signum


def watch(clock: StepClock, say: Callable[[str], None]) -> bool:
    """From now on a stop that finds the step stuck ends the process. Called from the main
    thread after the stop handlers are installed (only a signal with a Python handler is
    written to the wakeup fd). False, and nothing changed, where the wakeup fd is taken."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)  # the C handler must never block
    try:
        previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    except ValueError:  # not the main thread
        previous = None
    if previous != -1:  # someone else's (an event loop's): theirs to keep
        if previous is not None:
            signal.set_wakeup_fd(previous)
        os.close(read_fd)
        os.close(write_fd)
        return False
    threading.Thread(target=_watch, args=(read_fd, clock, say), name="ddpjob-stuck-stop", daemon=True).start()
    return True


def _watch(read_fd: int, clock: StepClock, say: Callable[[str], None]) -> None:
    while True:
        signals = os.read(read_fd, 64)
        if not signals:
            return
        stop = next((s for s in signals if s in STOPS), None)
        if stop is not None:
            break
    while True:  # the main thread saves and exits at its next step boundary, or this ends it
        stuck = clock.stuck()
        if stuck is not None and stuck.age >= stuck.limit:
            say(
                f"stop requested (signal {stop}) while step {stuck.step} has waited {stuck.age:.1f} s "
                f"(a step usually takes {stuck.usual:.2f} s): "
                "a peer neither answers nor closes its connection (its node cut off or frozen); "
                "exiting without a checkpoint, the newest saved one stands"
            )
            _exit_now(exit_codes.PREEMPTED)
        time.sleep(POLL_S)


def _exit_now(code: int) -> None:
    # The main thread is blocked in native code and may hold any lock: no exit handler is
    # run (quick_exit's would join threads), only the standard streams flushed.
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
