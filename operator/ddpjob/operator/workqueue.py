"""A per-key work queue: one worker per key at a time, triggers coalesced, errors retried.

Like client-go's rate-limited work queue: a key that is triggered while its worker runs
is marked dirty and handled once more afterwards (never twice at once); triggers within
a debounce window collapse into one; a handler that raises is retried after a capped,
jittered exponential backoff; a handler that asks to be woken later gets a timer. Its
`max_concurrent` slots go round-robin across the keys' groups (`fair_slots.py`: the
controller's are namespaces), so one tenant's burst does not hold up another's jobs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ddpjob.backoff import Backoff
from ddpjob.operator.fair_slots import FairSlots

logger = logging.getLogger("ddpjob.operator.workqueue")

# Retry backoff after an error: 0.2 s, 0.4 s, ... up to 10 s, so that after an API outage
# every job is reconciled again within seconds of the recovery.
RETRY_BASE, RETRY_CAP = 0.2, 10.0
# A timer fires at most this late after a due time (datetime rounding to seconds).
TIMER_SLACK = 0.01

# handle(key) -> seconds until the key wants another pass, or None to wait for a trigger.
Handler = Callable[[Any], Awaitable[float | None]]


def retry_delay(failures: int) -> float:
    """Capped exponential backoff with jitter, so many failing keys do not retry in step."""
    return Backoff(RETRY_BASE, RETRY_CAP, jitter=0.25).delay(failures)


K = TypeVar("K", bound=Hashable)  # what a queue is keyed by (the controller's: namespace, name)


@dataclass
class _Entry:
    dirty: bool = False
    task: asyncio.Task | None = None
    timer: asyncio.TimerHandle | None = None
    debounce: asyncio.TimerHandle | None = None
    failures: int = 0


class WorkQueue(Generic[K]):
    def __init__(
        self,
        handle: Handler,
        max_concurrent: int,
        on_error: Callable[[K, int, float, BaseException], None] | None = None,
        on_done: Callable[[float], None] | None = None,
        group: Callable[[K], Hashable] | None = None,
    ):
        """`group(key)`: whose turn a key waits in for a slot (default: its own)."""
        self._handle = handle
        self._group = group or (lambda key: key)
        self._on_error = on_error
        self._on_done = on_done
        self._entries: dict[K, _Entry] = {}
        self._slots = FairSlots(max_concurrent)
        self._closed = False

    def trigger(self, key: K, delay: float = 0.0) -> None:
        """Handle `key` now, or after `delay` (the triggers in between coalesce)."""
        if self._closed:
            return
        entry = self._entries.setdefault(key, _Entry())
        if delay <= 0:
            self._kick(key)
        elif entry.debounce is None:
            entry.debounce = asyncio.get_running_loop().call_later(delay, self._kick, key)

    def forget(self, key: K) -> None:
        """Drop the key's timers; a worker in flight finishes its pass."""
        entry = self._entries.pop(key, None)
        if entry is not None:
            for handle in (entry.timer, entry.debounce):
                if handle is not None:
                    handle.cancel()

    async def close(self) -> None:
        self._closed = True
        tasks = [e.task for e in self._entries.values() if e.task is not None]
        for key in list(self._entries):
            self.forget(key)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    @property
    def busy(self) -> bool:
        return any(e.task is not None or e.dirty for e in self._entries.values())

    def failures(self, key: K) -> int:
        entry = self._entries.get(key)
        return entry.failures if entry else 0

    def _kick(self, key: K) -> None:
        entry = self._entries.get(key)
        if entry is None or self._closed:
            return
        if entry.debounce is not None:
            entry.debounce.cancel()
            entry.debounce = None
        entry.dirty = True
        if entry.task is None:
            entry.task = asyncio.get_running_loop().create_task(self._worker(key, entry), name=f"reconcile {key}")

    def _schedule(self, key: K, entry: _Entry, delay: float | None) -> None:
        if entry.timer is not None:
            entry.timer.cancel()
            entry.timer = None
        if delay is not None and not self._closed and self._entries.get(key) is entry:
            entry.timer = asyncio.get_running_loop().call_later(max(delay, 0.0) + TIMER_SLACK, self._kick, key)

    async def _worker(self, key: K, entry: _Entry) -> None:
        try:
            while entry.dirty and not self._closed:
                entry.dirty = False
                async with self._slots.hold(self._group(key)):
                    started = time.perf_counter()
                    try:
                        requeue = await self._handle(key)
                    except asyncio.CancelledError:
                        raise
                    except Exception as exc:  # noqa: BLE001 - a handler's failure is retried, never the worker's end
                        entry.failures += 1
                        delay = retry_delay(entry.failures)
                        if self._on_error is not None:
                            self._on_error(key, entry.failures, delay, exc)
                        self._schedule(key, entry, delay)
                    else:
                        entry.failures = 0
                        self._schedule(key, entry, requeue)
                    finally:
                        if self._on_done is not None:
                            self._on_done(time.perf_counter() - started)
        finally:
            entry.task = None
