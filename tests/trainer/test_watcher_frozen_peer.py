"""The watcher's probe with a frozen peer (its node paused): the peer's store takes a
connection and then holds whoever calls it. The survivors are told, and the wait tripped,
without calling that store first: in the kind tier a paused node's survivor stayed in its
collective past its 10 s, its watcher held by the announce to the frozen peer."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import ClassVar

import pytest

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

    def look_up(self, nodes) -> None:
        pass  # no names here

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


class Thawed(Stores):
    """Node 1 (this node) was frozen a few seconds: node 0 answers, and its store points to
    a generation it made without node 1 (or, with `moved` False, to the one they share)."""

    moved = True

    def answers(self, node: int) -> bool:
        return True

    def pointer(self, node: int) -> Generation | None:
        if node == 0 and self.moved:
            return Generation(number=5, nodes=(0,), nproc=1, boots=("a",), steps=(12,), round_node=0)
        return Generation(number=4, nodes=(0, 1), nproc=1, boots=("a", "b"), steps=(9, 9), round_node=0)

    def call(self, node: int, op, default=None, retry: bool = True):
        store = SimpleNamespace(
            check=lambda keys: all(k in self.keys.get(node, set()) for k in keys),
            set=lambda key, value: self.keys.setdefault(node, set()).add(key),
        )
        return op(store)


@pytest.mark.parametrize("moved", [True, False])
def test_a_node_the_others_went_on_without_leaves_the_group_it_still_waits_in(monkeypatch, moved) -> None:
    """The kind tier, a node paused for 6 s (less than the node monitor's grace: its Pod
    lived on): the survivor went on alone and abandoned the old group; the thawed trainer
    waited in that group's all-reduce, every member answering its probe, for good."""
    Thawed.keys = {}
    monkeypatch.setattr(Thawed, "moved", moved)
    monkeypatch.setattr(watcher_module, "NodeStores", Thawed)
    trips: list[tuple[str, int | None]] = []
    interrupts = SimpleNamespace(
        oldest_wait=lambda now: watcher_module.HANG_PROBE + 1,
        trip=lambda reason, generation=None: trips.append((reason, generation)),
    )
    el = SimpleNamespace(node=1, local=0, max_nodes=2, interrupts=interrupts, stores=Thawed())
    watch = watcher_module.Watcher(el, ("n-1", 1))
    watch.follow(Generation(number=4, nodes=(0, 1), nproc=1, boots=("a", "b"), steps=(9, 9), round_node=0))
    try:
        deadline = time.monotonic() + (30 if moved else 2 * watcher_module.HANG_PROBE + 1)  # two probes
        while not trips and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        watch.stop()
    if not moved:
        assert trips == [] and "fail/4" not in Thawed.keys.get(1, set())
        return
    assert trips[0] == ("generation 4 went on without this node (generation 5: nodes [0])", 4), trips
    assert "fail/4" in Thawed.keys[1]  # its other local ranks, waiting too, are told by its own store
