"""Fakes of an in-place elastic group's node stores for the roster's tests: torch's
in-memory HashStore stands for each node's TCPStore, alive while its node is up."""

import threading

import torch.distributed as dist

from ddpjob_trainer import node_stores
from ddpjob_trainer.rounds import Rounds


class FakeStores(node_stores.NodeStores):
    """Nodes whose stores are HashStores, alive while in `up`; `boots` says whose store is
    which (a node created again gets a new store and a new boot)."""

    def __init__(self, max_nodes):
        super().__init__("127.0.0.1:1", max_nodes)
        self.up, self.backing, self.lock = set(), {}, threading.Lock()

    def start(self, node, boot):
        store = dist.HashStore()
        store.set("boot", boot)
        self.backing[node] = store
        self.up.add(node)

    def alive(self, node, timeout=0):
        return node in self.up

    def store(self, node):
        if node not in self.up:
            raise ConnectionError(f"node {node} is down")
        return self.backing[node]


def form_all(stores, nodes, prev, steps, deadline_s=10, **kw):
    """Every node's (one) worker takes part in the rounds at once; node -> its generation."""
    out, errors = {}, []

    def one(node):
        try:
            r = Rounds(stores, node, 0, 1, kw.get("min_nodes", 2), stores.max_nodes, f"boot{node}")
            out[node] = r.form(prev, steps.get(node, -1), r.clock() + deadline_s, **kw.get("extra", {}))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=one, args=(n,)) for n in nodes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(deadline_s + 5)
    assert not errors, errors
    return out


def four_nodes() -> FakeStores:
    s = FakeStores(4)
    for n in range(4):
        s.start(n, f"boot{n}")
    return s
