"""Each worker's watcher thread (an in-place elastic group, elastic.py): it polls its own
node's store for what the roster announces (roster.py) and acts at once:

- `fail/<n>`: the generation lost a peer (a worker saw its collective fail, or the launcher
  took the operator's notice): trip the interrupts, so the training thread stops waiting;
- `change/<n>`: a newcomer waits: this rank's next vote asks the group to re-form;
- a collective waited on for HANG_PROBE seconds: local rank 0 of each node probes the
  members' stores, and announces any that does not answer a request within PROBE_TIMEOUT
  (a peer that went silent without a connection reset: its node gone, or frozen, whose
  kernel still accepts connections) as lost from the generation; when all answer, it asks
  them which generation they are in: one that went on without this node means this node
  was the one judged lost (frozen for a few seconds, then thawed), and it re-joins.

It only ever reads its own node's store, so the polling costs nothing across the network.
"""

from __future__ import annotations

import threading
import time

from .node_stores import NodeStores
from .roster import Generation, lost_key

WATCH_EVERY = 0.05
HANG_PROBE = 3.0


class Watcher:
    def __init__(self, el, address: tuple[str, int], connect=None):
        self.el, self.address = el, address
        self.stores = NodeStores(el.stores.template, el.max_nodes, connect, own=el.node)  # its own clients
        self.gen: Generation | None = None
        self.changed = 0  # the generation in which a newcomer was seen waiting
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def change_wanted(self) -> bool:
        gen = self.gen
        return gen is not None and self.changed == gen.number

    def follow(self, gen: Generation) -> None:
        self.gen = gen
        self.stores.look_up(gen.nodes)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="ddpjob-elastic-watch", daemon=True)
            self._thread.start()

    def lost(self, generation: int, node: int) -> bool:
        """Whether this node's store holds a notice that `node` was lost from `generation`."""
        return bool(self.el.stores.call(self.el.node, lambda s: s.check([lost_key(generation, node)]), False))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None

    def _run(self) -> None:
        last_probe = 0.0
        while not self._stop.wait(WATCH_EVERY):
            gen, el = self.gen, self.el
            if gen is None:  # follow() sets it before the thread starts; never unset
                continue
            n = gen.number
            own = self.stores.call(el.node, lambda s, n=n: (s.check([f"fail/{n}"]), s.check([f"change/{n}"])))
            if own is None:
                el.interrupts.trip("this node's launcher stopped answering", n)
                continue
            if own[0]:
                el.interrupts.trip(f"generation {n} lost a peer", n)
            if own[1]:
                self.changed = n
            now = time.monotonic()
            if el.local == 0 and el.interrupts.oldest_wait(now) >= HANG_PROBE and now - last_probe >= HANG_PROBE:
                last_probe = now
                dead = [m for m in gen.nodes if m != el.node and not self.stores.answers(m)]
                if dead:
                    # The members that answered first: a frozen node's store still takes the
                    # connection and then holds whoever calls it, so telling it would keep
                    # this thread (and the trip) waiting on the very peer that was lost.
                    self._announce([m for m in gen.nodes if m not in dead], dead, n, self.stores)
                    # One judged lost may be only slow: told too, off this thread, with
                    # clients of its own (a NodeStores is not shared between threads).
                    late = NodeStores(self.stores.template, self.stores.max_nodes, self.stores.connect, self.stores.own)
                    threading.Thread(
                        target=self._announce, args=(dead, dead, n, late), name="ddpjob-elastic-tell", daemon=True
                    ).start()
                elif (moved := self._moved_on(gen)) is not None:
                    # Every member answers, and one is in a newer generation without this
                    # node: this node was the one judged lost, frozen for less than the
                    # node monitor's grace (its Pod lives on), and the others abandoned the
                    # group it still waits in; nothing else would ever end that wait. Its
                    # other local ranks are told through its own store, as for any loss.
                    self.stores.call(el.node, lambda s, n=n: s.set(f"fail/{n}", "1"))
                    el.interrupts.trip(
                        f"generation {n} went on without this node (generation {moved.number}: nodes "
                        f"{list(moved.nodes)})",
                        n,
                    )

    def _moved_on(self, gen: Generation) -> Generation | None:
        """A newer generation than `gen` that a member's store points to, without this node."""
        for m in gen.nodes:
            if m != self.el.node:
                newer = self.stores.pointer(m)
                if newer is not None and newer.number > gen.number and self.el.node not in newer.nodes:
                    return newer
        return None

    @staticmethod
    def _announce(to: list[int], dead: list[int], n: int, stores: NodeStores) -> None:
        for m in dead:
            stores.announce(to, lost_key(n, m))
        stores.announce(to, f"fail/{n}")
