"""A struggling API server, for robustness tests and benchmarks: a share of all requests
answered with 500/503/429, and watch streams closed every few seconds.

What a real overloaded control plane does: API Priority and Fairness rejects requests
with 429 (staging/src/k8s.io/apiserver/pkg/server/filters/priority-and-fairness.go,
"Too many requests, please try again later."), an etcd or webhook timeout surfaces as
500/503, and watch streams end when the server's timeout passes or a load balancer
drops them (clients resume from their last resourceVersion). `fault_proxy.FaultProxy`
applies it in front of the real API server (`Chaos(rate=0.3)`; rate 0 passes all).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

MESSAGES = {
    429: ("TooManyRequests", "Too many requests, please try again later."),
    500: ("InternalError", "Internal error occurred: etcdserver: request timed out"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
}


@dataclass
class Chaos:
    rate: float  # the share of requests that fail, 0..1
    statuses: tuple[int, ...] = (500, 503, 429)
    watch_lifetime: float | None = 3.0  # seconds before a watch stream is closed (None: never)
    seed: int | None = None
    failed: int = 0
    passed: int = 0
    _random: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0 <= self.rate <= 1:
            raise ValueError(f"rate must be within 0..1 (got {self.rate})")
        self._random = random.Random(self.seed)

    def fault(self) -> tuple[int, str, str] | None:
        """(status, reason, message) when this request fails, else None."""
        if self._random.random() >= self.rate:
            self.passed += 1
            return None
        self.failed += 1
        status = self._random.choice(self.statuses)
        return (status, *MESSAGES.get(status, ("InternalError", "injected")))

    def watch_seconds(self) -> float | None:
        """How long the next watch stream lives: `watch_lifetime`, jittered so that streams
        do not end in step (None: for ever)."""
        return None if self.watch_lifetime is None else self.watch_lifetime * self._random.uniform(0.5, 1.5)

    async def limit(self, events: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """End a watch stream after `watch_lifetime` seconds (jittered, so streams do not end in step)."""
        if self.watch_lifetime is None:
            async for event in events:
                yield event
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.watch_seconds() or 0.0)
        iterator = aiter(events)
        try:
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return
                try:
                    yield await asyncio.wait_for(anext(iterator), remaining)
                except (TimeoutError, StopAsyncIteration):
                    return
        finally:
            close = getattr(iterator, "aclose", None)
            if close is not None:
                await close()
