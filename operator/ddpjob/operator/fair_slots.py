"""The work queue's reconcile slots, shared round-robin across groups (namespaces).

The operator serves every namespace it watches through one `WorkQueue` of 64 slots. Taken
first come first served, one tenant's burst filled the queue: a job created during
another namespace's 1,000 waited behind all of them (13.9 s against 186 ms quiet,
docs/benchmarks.md, "One tenant against the others"). Here a freed slot goes to the group
that has waited longest since it was last served, first come first served within a group,
as the API server's priority and fairness shuffles its queues by flow: a tenant's burst
waits behind itself, and another tenant's job waits at most for one slot to free.

User: `workqueue.WorkQueue` (the controller's key is (namespace, name); its group, the
namespace).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Hashable


class FairSlots:
    def __init__(self, limit: int):
        self._free = limit
        # Groups with waiters, in the order they are to be served; each group's waiters in order.
        self._waiting: OrderedDict[Hashable, deque[asyncio.Future[None]]] = OrderedDict()

    @contextlib.asynccontextmanager
    async def hold(self, group: Hashable) -> AsyncIterator[None]:
        """A slot for the duration of the block, taken in `group`'s turn."""
        if self._free > 0 and not self._waiting:
            self._free -= 1
        else:
            granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting.setdefault(group, deque()).append(granted)
            try:
                await granted
            except asyncio.CancelledError:
                if granted.done() and not granted.cancelled():
                    self._release()  # handed over as it was cancelled: pass it on
                else:
                    granted.cancel()  # skipped when its turn comes
                raise
        try:
            yield
        finally:
            self._release()

    @property
    def waiting(self) -> int:
        return sum(1 for queue in self._waiting.values() for f in queue if not f.done())

    def _release(self) -> None:
        while self._waiting:
            group, queue = next(iter(self._waiting.items()))
            granted = queue.popleft()
            del self._waiting[group]
            if queue:
                self._waiting[group] = queue  # its next waiter goes to the back: round-robin
            if not granted.done():
                granted.set_result(None)
                return
        self._free += 1
