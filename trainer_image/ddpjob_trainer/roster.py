"""Who is in an elastic group that resizes in place: its generations, agreed through stores
that die with no single Pod.

Every node (Pod) runs a small key-value store in its launcher (a torch TCPStore,
node_store.py), reached at DDPJOB_NODE_ADDRESS with the node's index (`NodeStores`, node_stores.py). A
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

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass

ROUND_WAIT = 10.0  # seconds a round waits for an expected node that is still reachable
SETTLE = 2.0  # the first round: seconds after the last arrival before it closes with fewer than max
POLL = 0.02


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
