"""The work queue's slots go round-robin across namespaces: one tenant's burst of jobs waits
behind itself, not in front of another tenant's job (docs/benchmarks.md, "One tenant
against the others": 13.9 s against 186 ms quiet before this)."""

from __future__ import annotations

import asyncio

import pytest

from ddpjob.operator.fair_slots import FairSlots
from ddpjob.operator.workqueue import WorkQueue

pytestmark = pytest.mark.timeout(30)


def test_another_namespaces_job_is_handled_after_at_most_one_of_a_bursts() -> None:
    async def go() -> list[tuple[str, int]]:
        order: list[tuple[str, int]] = []

        async def handle(key: tuple[str, int]) -> None:
            order.append(key)
            await asyncio.sleep(0)

        queue = WorkQueue[tuple[str, int]](handle, max_concurrent=1, group=lambda key: key[0])
        for i in range(10):
            queue.trigger(("noisy", i))
        queue.trigger(("probe", 0))
        while queue.busy:
            await asyncio.sleep(0.001)
        await queue.close()
        return order

    order = asyncio.run(go())
    assert len(order) == 11 and order.index(("probe", 0)) <= 2, order  # first come first served: 10
    assert [k for k in order if k[0] == "noisy"] == [("noisy", i) for i in range(10)]  # in order within one


def test_a_waiter_cancelled_before_its_turn_takes_no_slot_and_one_cancelled_after_passes_it_on() -> None:
    async def go() -> list[str]:
        slots, got = FairSlots(1), []

        async def take(name: str, group: str, hold: asyncio.Event) -> None:
            async with slots.hold(group):
                got.append(name)
                await hold.wait()

        release = asyncio.Event()
        first = asyncio.create_task(take("first", "a", release))
        await asyncio.sleep(0)
        gone = asyncio.create_task(take("gone", "b", release))
        last = asyncio.create_task(take("last", "c", release))
        await asyncio.sleep(0)
        gone.cancel()
        release.set()
        await asyncio.gather(first, last, gone, return_exceptions=True)
        assert slots.waiting == 0
        async with slots.hold("d"):  # the slot came back
            got.append("again")
        return got

    assert asyncio.run(go()) == ["first", "last", "again"]
