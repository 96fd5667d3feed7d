"""The watcher's probe with a frozen peer (its node paused): the peer's store takes a
connection and then holds whoever calls it. The survivors are told, and the wait tripped,
without calling that store first: in the kind tier a paused node's survivor stayed in its
collective past its 10 s, its watcher held by the announce to the frozen peer."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import ClassVar

from ddpjob_trainer import watcher as watcher_module
from ddpjob_trainer.roster import Generation, lost_key

FROZEN = 1
held = threading.Event()  # set once something called the frozen peer's store


class Stores:
    """Node 0 (this node) and node 1 (frozen): node 1 does not answer the probe, and a call
    to its store never returns (nor does the test end it: the caller is a daemon thread)."""

    keys: ClassVar[dict[int, set[str]]] = {}

    def __init__(
        self, template: str = "n-{index}:1", max_nodes: int = 2, connect: object = None, own: int | None = None
    ) -> None:
        self.template, self.max_nodes, self.connect, self.own = template, max_nodes, connect, own

    def answers(self, node: int) -> bool:
        return node != FROZEN

    def announce(self, nodes: list[int], key: str) -> None:
        for node in nodes:
            if node == FROZEN:
                held.set()
                threading.Event().wait()
            self.keys.setdefault(node, set()).add(key)

    def call(self, node: int, op, default=None, retry: bool = True):
        store = SimpleNamespace(check=lambda keys: all(k in self.keys.get(node, set()) for k in keys))
        return op(store)


def test_a_frozen_peer_is_announced_lost_and_the_wait_tripped_without_calling_it(monkeypatch) -> None:
    monkeypatch.setattr(watcher_module, "NodeStores", Stores)
    trips: list[tuple[str, int | None]] = []
    interrupts = SimpleNamespace(
        oldest_wait=lambda now: watcher_module.HANG_PROBE + 1,  # a collective waits on the peer
        trip=lambda reason, generation=None: trips.append((reason, generation)),
    )
    el = SimpleNamespace(node=0, local=0, max_nodes=2, interrupts=interrupts, stores=Stores())
    watch = watcher_module.Watcher(el, ("n-0", 1))
    watch.follow(Generation(number=4, nodes=(0, 1), nproc=1, boots=("a", "b"), steps=(9, 9), round_node=0))
    try:
        deadline = time.monotonic() + 30
        while not trips and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        watch._stop.set()  # the thread ends at its next look, whatever the daemon told late does
    assert trips and trips[0] == ("generation 4 lost a peer", 4), trips
    assert {lost_key(4, FROZEN), "fail/4"} <= Stores.keys[0]
    # The frozen peer is told too (it may be only slow), off the watcher's thread.
    assert held.wait(10)
