"""Waiting on collectives in a way another thread can end.

gloo cannot abort a collective in flight (torch 2.14: `abort()` returns, the operation
waits on; destroying the group waits for it to time out), and a peer that vanishes
without a reset (its node gone, or frozen) leaves the others blocked until the group's
timeout. So the training thread never blocks in gloo itself: every collective of a step
is started asynchronously and its future tracked here (DDP's gradient buckets through a
communication hook, `comm_hook`, and DDP's other collectives through tracked_ddp.py; the
step's vote through `wait`). When the roster learns that the generation lost a peer
(roster.py's `fail/<n>`), `trip` completes every tracked future with `GroupLost`, the
step's backward or vote raises, and the worker re-forms its group at once. The abandoned
operations end by themselves later (an error or the group's timeout); their groups are
kept alive until then (group_reset.py).
"""

from __future__ import annotations

import threading
import time

import torch
import torch.distributed as dist


class GroupLost(RuntimeError):
    """The group lost a peer during a collective: the step in flight is not committed."""


class Interrupts:
    def __init__(self):
        self.lock = threading.Lock()
        self.pending: dict[int, tuple[torch.futures.Future, float]] = {}
        self.reason: str | None = None
        self.generation = 0

    def reset(self, generation: int = 0) -> None:
        """A new group: nothing tracked, nothing tripped; trips meant for another are ignored."""
        with self.lock:
            self.pending.clear()
            self.reason = None
            self.generation = generation

    def trip(self, reason: str, generation: int | None = None) -> None:
        """End every tracked wait with GroupLost (if `generation` is still the current one)."""
        with self.lock:
            if self.reason is not None or (generation is not None and generation != self.generation):
                return
            self.reason = reason
            waiting, self.pending = list(self.pending.values()), {}
        for fut, _ in waiting:
            _settle(fut, exception=GroupLost(reason))

    def oldest_wait(self, now: float | None = None) -> float:
        """Seconds the oldest tracked collective has been waited on (0: none)."""
        with self.lock:
            starts = [t for _, t in self.pending.values()]
        return ((now or time.monotonic()) - min(starts)) if starts else 0.0

    def track(self, fut: torch.futures.Future) -> torch.futures.Future:
        """A future that completes with `fut`'s value, or with GroupLost when tripped first."""
        out: torch.futures.Future = torch.futures.Future()
        with self.lock:
            if self.reason is not None:
                out.set_exception(GroupLost(self.reason))
                return out
            key = id(out)
            self.pending[key] = (out, time.monotonic())

        def done(f: torch.futures.Future) -> None:
            with self.lock:
                self.pending.pop(key, None)
            try:
                _settle(out, result=f.value())
            except Exception as exc:  # noqa: BLE001 - the collective's own failure: a lost peer
                _settle(out, exception=GroupLost(str(exc).splitlines()[0][:300]))

        fut.add_done_callback(done)
        return out

    def wait(self, work) -> None:
        """Wait for an async collective's work; GroupLost if it fails or is tripped."""
        self.track(work.get_future()).wait()


def _settle(fut: torch.futures.Future, result=None, exception: BaseException | None = None) -> None:
    try:
        if exception is not None:
            fut.set_exception(exception)
        else:
            fut.set_result(result)
    except RuntimeError:
        pass  # already completed the other way (tripped, then the collective ended)


def comm_hook(interrupts: Interrupts, group):
    """DDP's all-reduce of a gradient bucket (the default hook's arithmetic: divide, then
    sum), its future tracked so that a lost peer ends the backward instead of blocking it."""

    def hook(_state, bucket):
        tensor = bucket.buffer().div_(group.size())
        work = dist.all_reduce(tensor, group=group, async_op=True)
        return interrupts.track(work.get_future().then(lambda f: f.value()[0]))

    return hook
