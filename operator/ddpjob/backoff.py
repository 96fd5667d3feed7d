"""Capped exponential backoff with jitter: the one home of every retry delay.

`Backoff(base, cap, jitter).delay(n)` is the delay before retry `n` (1-based): base,
2*base, 4*base, ... at most `cap`, stretched by up to `jitter` (a fraction) at random, so
many clients that failed together do not retry in step. Who uses it, with which numbers:

- the operator's API calls (`kube.Kube`, 0.05 s .. 2 s) and kopf's own calls, watches and
  discovery (`settings.networking.error_backoffs` takes the endless iterable, 0.5 s .. 5 s);
- the work queue's retry of a failed reconcile (0.2 s .. 10 s);
- a refused create (0.5 s .. 30 s, operator/refusals.py);
- a gang waiting on its integration (2 s .. 300 s, job/scheduling.py);
- a gang held by its integration, what it says read again (Kueue's Workload 2 s .. 30 s,
  Volcano's PodGroup Events 5 s .. 2 min: their descriptions in api/gangs/);
- a gang restart (`restartBackoffSeconds` .. 300 s, no jitter, job/restart_policy.py).
- an elastic job's lost index created again (the same numbers, per index: its losses in a
  row, job/lost_indices.py).

The job logic is pure: it passes the random draw in (`delay(n, draw)`), from its input.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    base: float = 0.1
    cap: float = 10.0
    jitter: float = 0.25  # each delay is stretched by up to this fraction, at random

    def delay(self, attempt: int, draw: float | None = None) -> float:
        """The delay before retry number `attempt` (1-based); `draw` in [0, 1) replaces
        the random draw (for pure callers)."""
        draw = random.random() if draw is None else min(max(draw, 0.0), 1.0)
        return min(self.cap, self.base * 2 ** (max(attempt, 1) - 1)) * (1.0 + self.jitter * draw)

    def __iter__(self) -> Iterator[float]:
        attempt = 0
        while True:
            attempt += 1
            yield self.delay(attempt)
