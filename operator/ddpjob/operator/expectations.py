"""What this operator just created or deleted, until its watch shows it.

The operator observes through kopf's in-memory indices, which trail its own writes by
one watch event. Without expectations a reconcile that runs before the watch catches up
would create the same Pods again (harmless 409s, but API writes) or count a Pod it just
deleted as still running. client-go's ControllerExpectations solve the same problem.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable

from ddpjob.job.observe import PodState

# How long an expectation outlives silence from the watch (the API server or the watch
# lost the event): afterwards the index is trusted again.
EXPECTATION_TTL = 30.0


class Expectations:
    def __init__(self, ttl: float = EXPECTATION_TTL, clock: Callable[[], float] = time.monotonic):
        self.ttl = ttl
        self.clock = clock
        self._created: dict[str, tuple[PodState, float]] = {}
        self._deleted: dict[str, tuple[int | None, float]] = {}

    def created(self, pod: PodState) -> None:
        self._created[pod.name] = (pod, self.clock())

    def deleted(self, name: str, restart_count: int | None) -> None:
        """`restart_count`: the attempt of the Pod deleted (None: not known)."""
        self._deleted[name] = (restart_count, self.clock())

    def clear(self) -> None:
        self._created.clear()
        self._deleted.clear()

    def apply(self, seen: dict[str, PodState]) -> list[PodState]:
        """The indexed Pods corrected by what was just done; each expectation the watch
        has confirmed (or that timed out) is dropped."""
        seen = dict(seen)
        now = self.clock()
        for name, (pod, at) in list(self._created.items()):
            current = seen.get(name)
            if (current is not None and current.restart_count == pod.restart_count) or now - at > self.ttl:
                del self._created[name]  # the watch caught up (or never will)
            elif current is None:
                seen[name] = pod
        for name, (restart_count, at) in list(self._deleted.items()):
            current = seen.get(name)
            if current is None or current.restart_count != restart_count or now - at > self.ttl:
                del self._deleted[name]
            elif not current.deleting:
                seen[name] = dataclasses.replace(current, deleting=True)
        return sorted(seen.values(), key=lambda p: (p.node_rank, p.restart_count))

    def __bool__(self) -> bool:
        return bool(self._created or self._deleted)

    def names(self) -> Iterable[str]:
        return [*self._created, *self._deleted]
