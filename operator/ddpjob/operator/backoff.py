"""Capped exponential backoff with jitter, retried forever.

`Backoff` is an endless iterable of delays: kopf's `settings.networking.error_backoffs`
accepts one (kopf then retries its own API calls, its watches and its resource discovery
for as long as the server answers 5xx/429 or not at all, instead of giving up after a
fixed list and exiting), and `kube.Kube` uses the same delays for the operator's writes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterator


@dataclass(frozen=True)
class Backoff:
    base: float = 0.1
    cap: float = 10.0
    jitter: float = 0.25  # each delay is stretched by up to this fraction, at random

    def delay(self, attempt: int) -> float:
        """The delay before retry number `attempt` (1-based)."""
        return min(self.cap, self.base * 2 ** (max(attempt, 1) - 1)) * random.uniform(1.0, 1.0 + self.jitter)

    def __iter__(self) -> Iterator[float]:
        attempt = 0
        while True:
            attempt += 1
            yield self.delay(attempt)
