"""Who is in an elastic group that resizes in place: its generations, agreed through stores
that die with no single Pod.

Every node (Pod) runs a small key-value store in its launcher (a torch TCPStore,
node_store.py), reached at DDPJOB_NODE_ADDRESS with the node's index (`NodeStores`). A
generation is one membership: its number, its nodes (each with `nproc` workers), each
node's store identity (`boot`, drawn when its launcher starts: a Pod created again under
the same name is a new store, not the old one) and each worker's committed step.

Rounds. Generation n+1 is agreed in round n+1, held in the store of the lowest node of
generation n that still answers with the boot it had (the first round: node 0's). Each
worker appends its arrival (node, local rank, committed step or -1 for none, and the nodes
it expects, knows lost, or knows leaving). A member of generation n may close the round
(an atomic compare-and-set of `r<n>/gen`) once every expected node is complete (all its
workers arrived) and at least `min_nodes` are, or when ROUND_WAIT has run out with at
least `min_nodes` complete. The first round closes when `max_nodes` are complete, or
SETTLE seconds after the last arrival with `min_nodes`. Everyone derives the same
generation from the record; a worker left out either leaves (its node is going) or comes
to the next round as a newcomer. A newcomer never closes a round: it waits for members.

What a node's workers must hear at once is written into its store (`announce`), and each
worker polls only its own node's: `fail/<n>` (generation n lost a peer: stop waiting on
it), `change/<n>` (re-form at the next step boundary: a newcomer waits), `lost/<n>/<i>`
(node i was lost from generation n: a notice, or a probe; only that generation's next
round leaves it out, so a node that came back is not taken for lost again by the next
resize), `pointer` (the newest generation this node is in, for newcomers to find it).
"""

from __future__ import annotations

import datetime
import http.client
import json
import os
import socket
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

from ddpjob import contract

ROUND_WAIT = 10.0  # seconds a round waits for an expected node that is still reachable
SETTLE = 2.0  # the first round: seconds after the last arrival before it closes with fewer than max
POLL = 0.02
PROBE_TIMEOUT = 1.0
STORE_TIMEOUT = 5.0  # one store operation, once connected


def lost_key(generation: int, node: int) -> str:
    """The store key that says `node` was lost from `generation`."""
    return f"lost/{generation}/{node}"


class NoGroup(RuntimeError):
    """This worker found no group to be in: none formed in time, or none is left (no node of
    the newest generation answers). Retryable: a Pod that fails so is created again."""


class LeftOut(Exception):
    """The group re-formed without this worker's node while the node is being stopped (its
    Pod deleted, or asked to stop): it goes, as a node that votes to leave does, instead of
    coming back as a newcomer only to leave again at the next step."""


@dataclass(frozen=True)
class Arrival:
    node: int
    local: int
    step: int  # optimizer steps this worker has committed; -1: it has no state yet
    boot: str
    expect: tuple[int, ...] = ()
    lost: tuple[int, ...] = ()
    leaving: tuple[int, ...] = ()

    def line(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":")) + "\n"


def _ints(value, limit: int) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(type(v) is int and 0 <= v < limit for v in value):
        raise ValueError(value)
    return tuple(sorted(set(value)))


def parse_arrivals(raw: bytes, nproc: int, max_nodes: int) -> list[Arrival]:
    """A round's arrivals, the last of each worker kept; malformed lines are skipped."""
    found: dict[tuple[int, int], Arrival] = {}
    for line in raw.decode(errors="replace").splitlines():
        try:
            d = json.loads(line)
            a = Arrival(
                d["node"],
                d["local"],
                d["step"],
                str(d["boot"])[:64],
                _ints(d["expect"], max_nodes),
                _ints(d["lost"], max_nodes),
                _ints(d["leaving"], max_nodes),
            )
            if not (
                type(a.node) is int
                and 0 <= a.node < max_nodes
                and type(a.local) is int
                and 0 <= a.local < nproc
                and type(a.step) is int
            ):
                continue
        except (ValueError, KeyError, TypeError):
            continue
        found[(a.node, a.local)] = a
    return [found[k] for k in sorted(found)]


@dataclass(frozen=True)
class Generation:
    number: int
    nodes: tuple[int, ...]
    nproc: int
    boots: tuple[str, ...]  # of each node in `nodes`
    steps: tuple[int, ...]  # of each rank (node-major, then local rank)
    round_node: int  # whose store held the round: the new group's rendezvous store
    left: tuple[int, ...] = ()  # nodes of the previous generation that are not in this one

    @property
    def world_size(self) -> int:
        return len(self.nodes) * self.nproc

    def rank(self, node: int, local: int) -> int | None:
        return self.nodes.index(node) * self.nproc + local if node in self.nodes else None

    def boot(self, node: int) -> str:
        return self.boots[self.nodes.index(node)]

    @property
    def source(self) -> int | None:
        """The rank whose state every member takes (the most steps, the lowest rank);
        None when no member has any (a first formation: the checkpoint is read instead)."""
        best = max(self.steps)
        return None if best < 0 else self.steps.index(best)

    @property
    def needs_state(self) -> bool:
        """Whether some member must take the source's state (a newcomer, or a step one
        member committed and another did not when the last group broke)."""
        return self.source is not None and len(set(self.steps)) > 1

    def text(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @staticmethod
    def parse(raw: bytes | str) -> Generation:
        d = json.loads(raw)
        return Generation(
            int(d["number"]),
            tuple(d["nodes"]),
            int(d["nproc"]),
            tuple(d["boots"]),
            tuple(d["steps"]),
            int(d["round_node"]),
            tuple(d.get("left", ())),
        )


def decide(
    arrivals: list[Arrival],
    *,
    nproc: int,
    min_nodes: int,
    max_nodes: int,
    prev: Generation | None,
    dead: Iterable[int],
    waited: float,
    quiet: float,
) -> Generation | None:
    """The generation the round makes, if it may close now (None: wait). Pure: every
    participant that closes computes it from the same arrivals and its own probes."""
    by_node: dict[int, list[Arrival]] = {}
    for a in arrivals:
        by_node.setdefault(a.node, []).append(a)
    complete = {n for n, got in by_node.items() if len(got) == nproc}
    lost = set(dead).union(*(a.lost for a in arrivals))
    leaving = set().union(*(a.leaving for a in arrivals))
    eligible = sorted(complete - lost - leaving)[:max_nodes]
    if len(eligible) < min_nodes:
        return None
    if prev is None:
        ready = len(eligible) >= max_nodes or quiet >= SETTLE
    else:
        expect = set().union(*(a.expect for a in arrivals)) - lost - leaving
        ready = expect <= complete or waited >= ROUND_WAIT
    if not ready:
        return None
    chosen = [a for a in arrivals if a.node in eligible]
    boots = tuple(by_node[n][0].boot for n in eligible)
    left = tuple(sorted(set(prev.nodes) - set(eligible))) if prev else ()
    return Generation(
        (prev.number if prev else 0) + 1, tuple(eligible), nproc, boots, tuple(a.step for a in chosen), -1, left
    )


class NodeStores:
    """Clients of the nodes' stores, by index; a node that does not answer is simply absent."""

    def __init__(self, template: str, max_nodes: int, connect: Callable[[str, int], object] | None = None):
        self.template, self.max_nodes = template, max_nodes
        self.clients: dict[int, object] = {}
        self.connect = connect or _tcp_client
        # Each node's launcher serves /progress and /metrics there (contract: the same port
        # on every node, at the node's own name in a cluster); `answers` asks it. None where
        # the store's address is not the launcher's (`ddpjob run`: a node's launcher binds
        # an address of its own), or no port is set: the probe only connects, as before.
        port = os.environ.get(contract.PROGRESS_PORT, "")
        named = contract.INDEX_FIELD in template
        self.launcher_port: int | None = int(port) if named and port.isdigit() and 0 < int(port) < 65536 else None

    def address(self, node: int) -> tuple[str, int]:
        return contract.node_address(self.template, node)

    def alive(self, node: int, timeout: float = PROBE_TIMEOUT) -> bool:
        """Its launcher accepts a connection (no torch client first: one that retries a
        refused connection until its timeout, and logs each try)."""
        try:
            socket.create_connection(self.address(node), timeout=timeout).close()
            return True
        except OSError:
            self.clients.pop(node, None)
            return False

    def answers(self, node: int, timeout: float = PROBE_TIMEOUT) -> bool:
        """Its launcher answers within `timeout`: more than `alive`. A frozen node (paused,
        hung) still accepts connections in its kernel while nothing answers them, so a peer
        that only connects would wait on it for ROUND_WAIT or until the node is marked
        NotReady. A torch store client cannot ask (its handshake with a frozen store waits
        past its own timeout), so the launcher's HTTP endpoint (progress_server.py, on every
        node) is asked instead: any answer at all is a launcher that runs. Peers reach each
        other on every port (gloo's and NCCL's are chosen at random), so no NetworkPolicy
        that lets a job train keeps them from this one."""
        if not self.alive(node, timeout):
            return False
        if self.launcher_port is None:
            return True
        conn = http.client.HTTPConnection(self.address(node)[0], self.launcher_port, timeout=timeout)
        try:
            conn.request("GET", "/metrics")
            conn.getresponse().close()
            return True
        except (OSError, http.client.HTTPException):
            self.clients.pop(node, None)
            return False
        finally:
            conn.close()

    def store(self, node: int):
        if node not in self.clients:
            self.clients[node] = self.connect(*self.address(node))
        return self.clients[node]

    def call(self, node: int, op: Callable, default=None, retry: bool = True):
        """op(store of node), or `default` when the node does not answer. A kept client that
        fails is made again once if the node answers (`retry`; not for an op that must not
        run twice): its Pod was created again under the same name, a new store at the same
        address, and the old connection leads nowhere."""
        cached = node in self.clients
        try:
            return op(self.store(node))
        except Exception:  # noqa: BLE001 - a dead or re-created store: absent
            self.clients.pop(node, None)
        if not (retry and cached and self.alive(node)):
            return default
        try:
            return op(self.store(node))
        except Exception:  # noqa: BLE001 - as above
            self.clients.pop(node, None)
            return default

    def boot(self, node: int) -> str | None:
        if not self.alive(node):
            return None
        return self.call(node, lambda s: s.get("boot").decode())

    def pointer(self, node: int) -> Generation | None:
        if not self.alive(node):
            return None
        raw = self.call(node, lambda s: s.get("pointer") if s.check(["pointer"]) else None)
        try:
            return Generation.parse(raw) if raw else None
        except (ValueError, KeyError, TypeError):
            return None

    def announce(self, nodes: Iterable[int], key: str, value: str = "1") -> None:
        for node in nodes:  # that `answers`: a frozen node's store holds its caller for good
            if self.answers(node, PROBE_TIMEOUT / 2):
                self.call(node, lambda s: s.set(key, value))


def _tcp_client(host: str, port: int):
    import torch.distributed as dist

    timeout = datetime.timedelta(seconds=STORE_TIMEOUT)
    return dist.TCPStore(host, port, None, False, timeout=timeout, wait_for_workers=False)
