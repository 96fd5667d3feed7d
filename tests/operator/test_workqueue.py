"""The work queue alone: coalescing, one worker per key, retries with backoff, timers."""

from __future__ import annotations

import asyncio

import pytest

from ddpjob.operator import workqueue
from ddpjob.operator.workqueue import WorkQueue

pytestmark = pytest.mark.timeout(30)


async def drain(queue: WorkQueue) -> None:
    while queue.busy:
        await asyncio.sleep(0.005)


def test_triggers_while_running_coalesce_into_one_more_pass() -> None:
    async def go() -> list[str]:
        seen: list[str] = []

        async def handle(key: str) -> None:
            seen.append(key)
            await asyncio.sleep(0.02)

        queue = WorkQueue[str](handle, max_concurrent=4)
        queue.trigger("a")
        await asyncio.sleep(0.005)  # the first pass of "a" is running
        for _ in range(10):
            queue.trigger("a")
        queue.trigger("b")
        await drain(queue)
        await queue.close()
        return seen

    seen = asyncio.run(go())
    assert seen.count("a") == 2 and seen.count("b") == 1


def test_one_key_never_runs_twice_at_once() -> None:
    async def go() -> int:
        running, most = 0, 0

        async def handle(key: str) -> None:
            nonlocal running, most
            running += 1
            most = max(most, running)
            await asyncio.sleep(0.01)
            running -= 1

        queue = WorkQueue[str](handle, max_concurrent=8)
        for _ in range(5):
            queue.trigger("a")
            await asyncio.sleep(0.004)
        await drain(queue)
        return most

    assert asyncio.run(go()) == 1


def test_a_failing_handler_is_retried_with_growing_delays(monkeypatch) -> None:
    monkeypatch.setattr(workqueue, "RETRY_BASE", 0.01)
    errors: list[tuple[int, float]] = []

    async def go() -> int:
        attempts = 0

        async def handle(key: str) -> None:
            nonlocal attempts
            attempts += 1
            if attempts < 4:
                raise RuntimeError("boom")

        queue = WorkQueue[str](handle, max_concurrent=1, on_error=lambda k, n, d, e: errors.append((n, d)))
        queue.trigger("a")
        for _ in range(200):
            await asyncio.sleep(0.01)
            if attempts >= 4:
                break
        await drain(queue)
        assert queue.failures("a") == 0  # success resets the count
        await queue.close()
        return attempts

    assert asyncio.run(go()) == 4
    assert [n for n, _ in errors] == [1, 2, 3]
    delays = [d for _, d in errors]
    assert delays[0] < delays[1] < delays[2]


def test_retry_delay_is_capped() -> None:
    assert workqueue.retry_delay(1) >= workqueue.RETRY_BASE
    assert workqueue.retry_delay(100) <= workqueue.RETRY_CAP * 1.25


def test_a_requeue_time_wakes_the_key_and_forget_cancels_it() -> None:
    async def go() -> tuple[int, int]:
        counts = {"a": 0, "b": 0}

        async def handle(key: str) -> float | None:
            counts[key] += 1
            return 0.02 if counts[key] == 1 else None

        queue = WorkQueue[str](handle, max_concurrent=2)
        queue.trigger("a")
        queue.trigger("b")
        await asyncio.sleep(0.005)
        queue.forget("b")  # its timer must not fire
        await asyncio.sleep(0.1)
        await queue.close()
        return counts["a"], counts["b"]

    assert asyncio.run(go()) == (2, 1)


def test_delayed_triggers_debounce_into_one() -> None:
    async def go() -> int:
        calls = 0

        async def handle(key: str) -> None:
            nonlocal calls
            calls += 1

        queue = WorkQueue[str](handle, max_concurrent=1)
        for _ in range(5):
            queue.trigger("a", delay=0.03)
        await asyncio.sleep(0.08)
        await drain(queue)
        return calls

    assert asyncio.run(go()) == 1
