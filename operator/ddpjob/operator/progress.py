"""The operator's progress poller: reads Pod 0's `/progress` (ddpjob-launch) of each
Running job at a bounded rate and hands the result to the reconcile.

Bounds, so that 1,000 jobs do not flood anything:
- per job: one fetch every `interval` seconds (default 30) plus 0..`jitter` of it, so
  jobs started together do not poll together and none is read faster than `interval`;
- globally: at most `max_per_second` fetches start per second (a token bucket) and at
  most `max_in_flight` run at once; when more are due, they wait (every job's interval
  stretches evenly rather than some jobs starving);
- a reconcile is asked for only when the record changed or a stall is suspected, and
  the reconcile writes `status.progress` only when it differs from what is stored;
- status writes: a changed record is handed over at most once per `write_interval()`
  per job (the read interval, stretched so that all watched jobs together could write
  `max_writes_per_second`), and only while a token bucket of that rate has a token, so
  the writes stay at most `max_writes_per_second` (default 5) at any moment, not just on
  average; a read that finds no token leaves its record to a later read. At 1,000 jobs
  each job's progress is written about every 200 s while it is still read every 30 s.
  A write costs the operator several times a read (the patch, and kopf processing the
  MODIFIED event it comes back as), so at scale the writes, not the reads, would cost
  the CPU. A suspected stall, and the first record of a gang attempt, go through at once.

Every answer is untrusted (the code in the Pod wrote it): no redirect is followed (an
answer cannot make the operator fetch another address), one deadline covers the whole
response (a Pod that drips a byte every few seconds is cut off, not waited on per read),
the body is capped (`progress_fetch.py`), and `ProgressState.from_snapshot` bounds every
number and the ranks.
Fetches run on a thread pool of their own (`max_in_flight` threads), and a job has at
most one fetch at a time (the extra reads of a suspected stall go one after another,
within one deadline), so a slow or hostile job holds one thread and delays only itself.

How the Pod is reached: directly, at `status.podIP` and the contract's progress port.
Not through the API server's pod proxy: that would put every fetch through the API
server (33 requests/s at 1,000 jobs) and needs RBAC `pods/proxy`, which lets its holder
reach any port of any Pod it can name. The cost of going direct: where a NetworkPolicy
denies ingress by default, it must admit the operator's Pods to port 29510 (docs/design.md).
When a stall is suspected, every Pod of the gang is read once, to name the stale ranks.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import heapq
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ddpjob import contract
from ddpjob.job.stall import MAX_RANKS, ProgressState
from ddpjob.operator.progress_fetch import fetch_json, progress_url

logger = logging.getLogger("ddpjob.operator.progress")

Key = tuple[str, str]
DEFAULT_INTERVAL = 30.0
DEFAULT_JITTER = 0.2
DEFAULT_MAX_PER_SECOND = 50.0
DEFAULT_MAX_IN_FLIGHT = 32
DEFAULT_MAX_WRITES_PER_SECOND = 5.0
STALL_READS_TIMEOUT = 10.0  # for the other Pods' reads of one suspected stall, together


@dataclass(frozen=True)
class Target:
    attempt: int  # the gang attempt (restart count) of these Pods
    addresses: tuple[str | None, ...]  # Pod IP by node rank
    stall_timeout: int | None
    port: int = contract.DEFAULT_PROGRESS_PORT
    world_size: int = MAX_RANKS  # ranks beyond it in an answer are not this job's


class TokenBucket:
    def __init__(self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic):
        self.rate, self.burst, self.clock = rate, burst, clock
        self.tokens, self.at = burst, clock()

    def wait_time(self) -> float:
        """Take a token now (0.0) or say how long until one is there."""
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate


class ProgressPoller:
    def __init__(
        self,
        on_progress: Callable[[Key], None],
        interval: float = DEFAULT_INTERVAL,
        jitter: float = DEFAULT_JITTER,
        max_per_second: float = DEFAULT_MAX_PER_SECOND,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        max_writes_per_second: float = DEFAULT_MAX_WRITES_PER_SECOND,
        fetch: Callable[[str], Any] = fetch_json,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.on_progress, self.interval, self.jitter = on_progress, interval, jitter
        self.max_writes_per_second = max_writes_per_second
        self.write_bucket = TokenBucket(max_writes_per_second, max(1.0, max_writes_per_second), clock)
        self.fetch, self.clock = fetch, clock
        self.bucket = TokenBucket(max_per_second, max(1.0, max_per_second), clock)
        self.in_flight = asyncio.Semaphore(max_in_flight)
        # Threads of its own: the loop's default pool (min(32, cores + 4)) is shared with
        # kopf and would be the limit a handful of slow Pods could fill.
        self._pool = concurrent.futures.ThreadPoolExecutor(max_in_flight, thread_name_prefix="ddpjob-progress")
        self.targets: dict[Key, Target] = {}
        self._due: list[tuple[float, int, Key]] = []
        self._seq = 0
        self._scheduled: dict[Key, int] = {}
        self._latest: dict[Key, ProgressState] = {}  # not yet taken by a reconcile
        self._delivered: dict[Key, tuple[int, Any]] = {}  # (attempt, record) last handed over
        self._delivered_at: dict[Key, float] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._closed = False
        self._tasks: set[asyncio.Task] = set()
        self.fetches = self.failures = 0

    # ---- what the controller calls --------------------------------------------------------

    def watch(self, key: Key, target: Target) -> None:
        """Poll this job (its gang runs); a new attempt or address list replaces the old."""
        if self._task is None:
            # Started from the first reconcile, not at operator start-up: tasks inherit the
            # context they are made in, and kopf.event needs the one its handlers run in.
            self.start()
        old = self.targets.get(key)
        self.targets[key] = target
        if old is None or old.attempt != target.attempt:
            # The first look after a random part of the time the global rate needs to read
            # every watched job once (a second at least, the interval at most): a burst of
            # starts is spread as before, and the few jobs a replica takes over when it comes
            # to lead show their progress within seconds, not up to an interval later (the
            # kind tier's operator_loss once waited more than 20 s for it).
            spread = min(self.interval, max(1.0, len(self.targets) / self.bucket.rate))
            self._schedule(key, spread * random.random())

    def unwatch(self, key: Key) -> None:
        self.targets.pop(key, None)
        self._scheduled.pop(key, None)
        self._latest.pop(key, None)
        self._delivered.pop(key, None)
        self._delivered_at.pop(key, None)

    def write_interval(self) -> float:
        """The least time between two hand-overs of one job's changed record."""
        return max(self.interval, len(self.targets) / self.max_writes_per_second)

    def take(self, key: Key) -> ProgressState | None:
        return self._latest.pop(key, None)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="ddpjob-progress-poller")

    async def close(self) -> None:
        # The flag as well as the cancel: Python 3.11's wait_for can swallow a cancel that
        # races with its timeout, and the loop would then run on and close() never return.
        self._closed = True
        self._wake.set()
        for task in [self._task, *self._tasks]:
            if task is not None:
                task.cancel()
        await asyncio.gather(*[t for t in [self._task, *self._tasks] if t is not None], return_exceptions=True)
        self._task = None
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def _fetch(self, url: str) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, self.fetch, url)

    # ---- the loop --------------------------------------------------------------------------

    def _schedule(self, key: Key, delay: float) -> None:
        self._seq += 1
        self._scheduled[key] = self._seq  # one entry per job counts; older ones are skipped
        heapq.heappush(self._due, (self.clock() + delay, self._seq, key))
        self._wake.set()

    def _next_delay(self) -> float:
        # Jitter only upwards: never faster than one read per `interval`.
        return self.interval * (1 + random.uniform(0, self.jitter))

    async def _run(self) -> None:
        while not self._closed:
            if not self._due:
                self._wake.clear()
                await self._wake.wait()
                continue
            due, _, key = self._due[0]
            now = self.clock()
            if due > now:
                self._wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), due - now)
                continue
            target = self.targets.get(key)
            if target is None or self._scheduled.get(key) != self._due[0][1]:
                heapq.heappop(self._due)  # unwatched meanwhile, or rescheduled: not a fetch
                continue
            wait = self.bucket.wait_time()
            if wait:
                await asyncio.sleep(wait)
                continue
            heapq.heappop(self._due)
            await self.in_flight.acquire()
            task = asyncio.get_running_loop().create_task(self._poll(key, target))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _poll(self, key: Key, target: Target) -> None:
        try:
            state = await self._read(key, target)
        except Exception as exc:  # noqa: BLE001 (a malformed answer must not end this job's polling)
            self.failures += 1
            logger.debug("progress of %s/%s: %r", *key, exc)
            state = None
        finally:
            self.in_flight.release()
        current = self.targets.get(key)
        if current is None or current.attempt != target.attempt:
            return  # unwatched, or a new attempt (watch() scheduled it)
        self._schedule(key, self._next_delay())
        if state is None:
            return
        delivered, last = (target.attempt, state.record), self._delivered.get(key)
        suspect = bool(current.stall_timeout and state.record and state.seconds_since_progress >= current.stall_timeout)
        now = self.clock()
        # Reads come every interval x (1 + jitter): a hand-over due within this read's
        # jitter is not put off to the next read.
        first = last is None or last[0] != target.attempt
        due = now - self._delivered_at.get(key, -float("inf")) >= self.write_interval() - self.interval * self.jitter
        if suspect or (delivered != last and (first or (due and self.write_bucket.wait_time() == 0.0))):
            self._delivered[key], self._delivered_at[key] = delivered, now
            self._latest[key] = state
            self.on_progress(key)

    async def _read(self, key: Key, target: Target) -> ProgressState | None:
        ip = target.addresses[0] if target.addresses else None
        if not ip:
            return None
        self.fetches += 1
        try:
            snap = await self._fetch(progress_url(ip, target.port))
            state = ProgressState.from_snapshot(snap, target.attempt, target.world_size)
        except Exception as exc:  # noqa: BLE001 (a Pod that does not answer is no error of ours)
            self.failures += 1
            logger.debug("progress of %s/%s from %s: %r", *key, ip, exc)
            return None
        if target.stall_timeout and state.record and state.seconds_since_progress >= target.stall_timeout:
            # Looks stalled: read every Pod once, so the Event can name the stale ranks.
            # One after another, within one deadline: this job holds one thread at a time.
            deadline = self.clock() + STALL_READS_TIMEOUT
            for address in (a for a in target.addresses[1:] if a):
                if self.clock() > deadline:
                    break
                self.fetches += 1
                try:
                    answer = await self._fetch(progress_url(address, target.port))
                    state = state.with_ranks(
                        ProgressState.from_snapshot(answer, target.attempt, target.world_size).ranks
                    )
                except Exception:  # noqa: BLE001 (an unreadable rank is reported as missing)
                    self.failures += 1
        return state
