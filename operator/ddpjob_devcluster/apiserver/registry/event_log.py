"""The emulated server's event log: every change in resourceVersion order, which watches replay and follow.

Writes append under the store's lock (from the server's loop or a test's thread); a
watch follows the log from a position and wakes when it grows.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

from kmock import resource as Resource

from ddpjob_devcluster.apiserver.registry.plaindata import fresh

Entry = tuple[int, Resource, dict[str, Any]]  # (resourceVersion, resource, watch event)


class EventLog:
    def __init__(self, lock: threading.RLock):
        self.entries: list[Entry] = []
        self._lock = lock
        self._changed = asyncio.Event()
        self._closed = False
        self.loop: asyncio.AbstractEventLoop | None = None  # the serving loop, set by the emulator

    def append(self, res: Resource, kind: str, obj: dict[str, Any]) -> None:
        """Log a change (the caller holds the lock) and wake the watches."""
        self.entries.append((int(obj["metadata"]["resourceVersion"]), res, {"type": kind, "object": fresh(obj)}))
        self._wake()

    def end(self) -> int:
        return len(self.entries)

    def after(self, rv: int) -> int:
        """The position of the first change newer than resourceVersion `rv`."""
        return next((i for i, (entry_rv, _, _) in enumerate(self.entries) if entry_rv > rv), len(self.entries))

    async def follow(
        self,
        position: int,
        res: Resource,
        namespace: str | None,
        matches: Callable[[dict[str, Any]], bool],
        deadline: float | None,
    ) -> AsyncIterator[dict[str, Any]]:
        """The matching events from `position` on, as they come, until the deadline or close()."""
        while not self._closed:
            changed = self._changed
            with self._lock:
                new_events, position = self.entries[position:], len(self.entries)
            for _, event_res, event in new_events:
                obj = event["object"]
                if event_res == res and namespace in (None, obj["metadata"].get("namespace")) and matches(obj):
                    yield event
            remaining = None if deadline is None else deadline - asyncio.get_running_loop().time()
            if remaining is not None and remaining <= 0:
                return
            try:
                await asyncio.wait_for(changed.wait(), remaining)
            except TimeoutError:
                return

    def close(self) -> None:
        self._closed = True
        self._wake()

    def _wake(self) -> None:
        # Tests may write through the store from their own thread; asyncio.Event is not
        # thread-safe, so hand the wake-up to the server's loop then.
        loop = self.loop
        if loop is not None and loop.is_running() and not _in_loop(loop):
            loop.call_soon_threadsafe(self._wake)
            return
        self._changed.set()
        self._changed = asyncio.Event()


def _in_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def initial_events_end(api_version: str, kind: str, resource_version: int) -> dict[str, Any]:
    """The bookmark that ends a watch-list's initial events (`sendInitialEvents=true`, what
    kubectl 1.37's watches ask for): the API server's `k8s.io/initial-events-end`."""
    return {
        "type": "BOOKMARK",
        "object": {
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {
                "resourceVersion": str(resource_version),
                "annotations": {"k8s.io/initial-events-end": "true"},
            },
        },
    }
