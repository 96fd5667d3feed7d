"""Taking part in the rounds that make an in-place elastic group's generations (roster.py):
find the store that holds the round, arrive, wait for it or close it, read what it made."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import replace

from .node_stores import NodeStores
from .roster import POLL, Arrival, Generation, LeftOut, NoGroup, decide, parse_arrivals

PROBE_EVERY = 0.5  # seconds between two probes of one expected node that has not arrived
# Seconds a worker outside the group keeps looking for it while no member answers: a probe
# of a loaded node misses now and then, and a group whose members all finished meanwhile
# leaves its checkpoint saying so (`over`) only once the last save is written.
NEWCOMER_PATIENCE = 30.0
_FAILED = object()


class Rounds:
    def __init__(
        self,
        stores: NodeStores,
        node: int,
        local: int,
        nproc: int,
        min_nodes: int,
        max_nodes: int,
        boot: str,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.stores, self.node, self.local, self.nproc = stores, node, local, nproc
        self.min_nodes, self.max_nodes, self.boot = min_nodes, max_nodes, boot
        self.clock, self.sleep = clock, sleep
        self.patience = NEWCOMER_PATIENCE

    def coordinator(self, prev: Generation | None, lost: Iterable[int] = ()) -> int | None:
        """Where round prev+1 is held: the lowest node of `prev` whose store is the one it
        had (not a Pod created again under its name), of those not known `lost` (a frozen
        node's store would hold the call); the first round: node 0."""
        if prev is None:
            return 0 if self.stores.alive(0) else None
        skip = set(lost)
        return next((n for n in prev.nodes if n not in skip and self.stores.boot(n) == prev.boot(n)), None)

    def newest(self) -> Generation | None:
        """The newest generation any other node says it is in: where a newcomer goes."""
        best = None
        for i in range(self.max_nodes):
            found = self.stores.pointer(i) if i != self.node else None
            if found is not None and (best is None or found.number > best.number):
                best = found
        return best

    def form(
        self,
        prev: Generation | None,
        step: int,
        deadline: float,
        *,
        lost: Iterable[int] = (),
        leaving: Iterable[int] = (),
        over: Callable[[], bool] = lambda: False,
        stopping: Callable[[], bool] = lambda: False,
    ) -> Generation:
        """Take part in rounds until one makes a generation with this worker in it. `over`:
        whether training is known to be over, asked while no node answers (node 0 not up yet
        looks the same as every node gone: a node created again too late, or one the others
        went on without and then finished). Outside the group, nobody answering ends the
        search only after `patience` seconds of it, looking again for the newest generation
        every half second. `stopping`: whether this worker was asked to stop; LeftOut when a
        generation without it forms meanwhile."""
        member = prev is not None and self.node in prev.nodes
        silent_since = None
        while True:
            if self.clock() > deadline:
                raise NoGroup(f"no group formed with node {self.node} in time")
            c = self.coordinator(prev, lost)
            if c is None:
                if over():
                    raise NoGroup(f"no node answers node {self.node}, and training is over")
                now = self.clock()
                silent_since = now if silent_since is None else silent_since
                if prev is not None and now - silent_since >= self.patience:
                    raise NoGroup(
                        f"no node of generation {prev.number} ({list(prev.nodes)}) answers "
                        f"(looked for {now - silent_since:.0f}s)"
                    )
                self.sleep(PROBE_EVERY)  # node 0 not up yet, or a probe missed: look again
                newer = self.newest() if prev is not None else None
                if newer is not None and newer != prev:  # (`lost` stays with its own generation)
                    prev, member, lost, leaving = newer, False, (), ()
                continue
            silent_since = None
            gen = self._round(c, prev, step, member, tuple(lost), tuple(leaving), deadline)
            if gen is None:
                continue  # the store holding the round went away: the next node holds it
            # This worker's node, not one of its name before it: a Pod created again under
            # the name reads the generations its predecessor was in (round 1's, say).
            if self.node in gen.nodes and gen.boot(self.node) == self.boot:
                return gen
            if stopping():
                raise LeftOut(f"generation {gen.number} formed without node {self.node}, which is stopping")
            prev, member, lost, leaving = gen, False, (), ()  # left out: the next round, as a newcomer

    def _round(
        self,
        c: int,
        prev: Generation | None,
        step: int,
        member: bool,
        lost: tuple[int, ...],
        leaving: tuple[int, ...],
        deadline: float,
    ) -> Generation | None:
        n = prev.number + 1 if prev else 1
        expect = prev.nodes if prev else ()
        arrival = Arrival(self.node, self.local, step, self.boot, tuple(expect), lost, leaving)
        key_in, key_gen = f"r{n}/in", f"r{n}/gen"
        # Not retried: an arrival appended twice would leave its node incomplete. A failed
        # one is taken again from the top (`form`), on a client made afresh.
        if self.stores.call(c, lambda s: s.append(key_in, arrival.line()), _FAILED, retry=False) is _FAILED:
            return None
        if prev is not None and not member:
            self.stores.announce(prev.nodes, f"change/{prev.number}")  # members: come at your next step
        opened = last_change = self.clock()
        count, dead, probed = 0, set[int](), dict[int, float]()
        # Every call to the round's store is made once (retry=False), on the client that
        # arrived there: one that fails means the store holding the round went away. A
        # retry would connect to whatever answers at its address now (the Pod created again
        # under the same name), whose fresh store knows nothing of this round, and wait on it
        # for good. `form` picks the holder again, by boot; a second arrival of this worker
        # in the same round, after a failure that was only slow, replaces the first.
        while self.clock() < deadline:
            raw = self.stores.call(c, lambda s: s.get(key_gen) if s.check([key_gen]) else b"", retry=False)
            if raw is None:
                return None
            if raw:
                return Generation.parse(raw)
            if member or prev is None:  # a newcomer never closes: it waits for the members
                got = self.stores.call(c, lambda s: s.get(key_in), retry=False)
                if got is None:
                    return None
                arrivals = parse_arrivals(got, self.nproc, self.max_nodes)
                now = self.clock()
                if len(arrivals) != count:
                    count, last_change = len(arrivals), now
                arrived = {a.node for a in arrivals}
                for node in set(expect) - arrived - dead - set(leaving):
                    if now - probed.get(node, -PROBE_EVERY) >= PROBE_EVERY:
                        probed[node] = now
                        if not self.stores.alive(node):
                            dead.add(node)
                gen = decide(
                    arrivals,
                    nproc=self.nproc,
                    min_nodes=self.min_nodes,
                    max_nodes=self.max_nodes,
                    prev=prev,
                    dead=dead,
                    waited=now - opened,
                    quiet=now - last_change,
                )
                if gen is not None:
                    won = self.stores.call(
                        c,
                        lambda s, gen=gen: s.compare_set(key_gen, "", replace(gen, round_node=c).text()),
                        retry=False,
                    )
                    return None if won is None else Generation.parse(won)
            self.sleep(POLL)
        raise NoGroup(f"round {n} did not close in time (node {self.node})")
