"""The roster of a group that resizes in place (ddpjob_trainer.roster, .rounds): which
generation a round makes, and the rounds themselves over stores that live and die with
their nodes (torch's in-memory HashStore stands for each node's TCPStore here)."""

import datetime
import threading
import time

import pytest

from ddpjob_trainer import node_stores, roster
from ddpjob_trainer.roster import Arrival, Generation, LeftOut, NoGroup, decide, parse_arrivals
from ddpjob_trainer.rounds import Rounds
from tests.trainer.roster_fakes import FakeStores, form_all, four_nodes


def arrivals(*specs, expect=(), lost=(), leaving=()):
    """(node, local, step) triples -> arrivals, every one expecting `expect`."""
    return [Arrival(n, r, s, f"boot{n}", tuple(expect), tuple(lost), tuple(leaving)) for n, r, s in specs]


def test_a_first_round_closes_with_every_node_or_after_it_settles_with_the_minimum():
    three = arrivals((0, 0, -1), (1, 0, -1), (2, 0, -1))
    assert decide(three, nproc=1, min_nodes=2, max_nodes=4, prev=None, dead=(), waited=0, quiet=0) is None
    gen = decide(three, nproc=1, min_nodes=2, max_nodes=4, prev=None, dead=(), waited=0, quiet=roster.SETTLE)
    assert gen.number == 1 and gen.nodes == (0, 1, 2) and gen.source is None and not gen.needs_state
    four = three + arrivals((3, 0, -1))
    assert decide(four, nproc=1, min_nodes=2, max_nodes=4, prev=None, dead=(), waited=0, quiet=0).nodes == (0, 1, 2, 3)
    one = arrivals((0, 0, -1))
    assert decide(one, nproc=1, min_nodes=2, max_nodes=4, prev=None, dead=(), waited=99, quiet=99) is None


def test_a_node_counts_only_once_every_one_of_its_workers_arrived():
    partial = arrivals((0, 0, -1), (0, 1, -1), (1, 0, -1))
    assert decide(partial, nproc=2, min_nodes=2, max_nodes=2, prev=None, dead=(), waited=9, quiet=9) is None
    gen = decide(
        partial + arrivals((1, 1, -1)), nproc=2, min_nodes=2, max_nodes=2, prev=None, dead=(), waited=0, quiet=0
    )
    assert gen.world_size == 4 and gen.rank(1, 1) == 3 and gen.rank(5, 0) is None


PREV = Generation(4, (0, 1, 2, 3), 1, ("boot0", "boot1", "boot2", "boot3"), (9, 9, 9, 9), 0)


def test_a_later_round_waits_for_every_expected_node_unless_it_is_dead_leaving_or_late():
    survivors = arrivals((0, 0, 10), (1, 0, 10), (3, 0, 10), expect=PREV.nodes)
    kw = dict(nproc=1, min_nodes=2, max_nodes=4, prev=PREV, quiet=0)
    assert decide(survivors, dead=(), waited=0, **kw) is None  # node 2 may still come
    gen = decide(survivors, dead=(2,), waited=0, **kw)  # its store does not answer
    assert (gen.number, gen.nodes, gen.left) == (5, (0, 1, 3), (2,))
    assert decide(
        arrivals((0, 0, 10), (1, 0, 10), (3, 0, 10), expect=PREV.nodes, leaving=(2,)), dead=(), waited=0, **kw
    ).nodes == (0, 1, 3)
    assert decide(survivors, dead=(), waited=roster.ROUND_WAIT, **kw).nodes == (0, 1, 3)  # it took too long
    noticed = arrivals((0, 0, 10), (1, 0, 10), (3, 0, 10), expect=PREV.nodes, lost=(2,))
    assert decide(noticed, dead=(), waited=0, **kw).nodes == (0, 1, 3)
    assert decide(survivors[:1], dead=(1, 2, 3), waited=99, **kw) is None  # under the minimum: wait


def test_the_state_comes_from_the_member_with_the_most_steps():
    mixed = arrivals((0, 0, 10), (1, 0, 11), (2, 0, -1), expect=(0, 1))
    gen = decide(
        mixed,
        nproc=1,
        min_nodes=1,
        max_nodes=4,
        prev=Generation(1, (0, 1), 1, ("boot0", "boot1"), (9, 9), 0),
        dead=(),
        waited=0,
        quiet=0,
    )
    assert gen.steps == (10, 11, -1) and gen.source == 1 and gen.needs_state
    same = decide(
        arrivals((0, 0, 10), (1, 0, 10), expect=(0, 1)),
        nproc=1,
        min_nodes=1,
        max_nodes=4,
        prev=Generation(1, (0, 1), 1, ("boot0", "boot1"), (9, 9), 0),
        dead=(),
        waited=0,
        quiet=0,
    )
    assert same.source == 0 and not same.needs_state
    assert Generation.parse(gen.text()) == gen


def test_arrivals_are_parsed_as_untrusted_lines():
    good = Arrival(1, 0, 5, "b", (0, 1), (), ()).line()
    raw = (
        good
        + "not json\n"
        + '{"node": 9, "local": 0, "step": 1, "boot": "x", "expect": [], "lost": [], "leaving": []}\n'
        + '{"node": 0, "local": 3, "step": 1, "boot": "x", "expect": [], "lost": [], "leaving": []}\n'
        + '{"node": 0, "local": 0, "step": 1, "boot": "x", "expect": [77], "lost": [], "leaving": []}\n'
        + Arrival(1, 0, 6, "b", (0, 1), (), ()).line()
    ).encode()
    assert parse_arrivals(raw, nproc=2, max_nodes=4) == [Arrival(1, 0, 6, "b", (0, 1), (), ())]


@pytest.fixture
def stores():
    return four_nodes()


def test_the_first_round_is_held_by_node_0_and_all_agree(stores):
    gens = form_all(stores, range(4), None, {})
    assert {g.nodes for g in gens.values()} == {(0, 1, 2, 3)} and all(g.round_node == 0 for g in gens.values())


def test_survivors_of_a_lost_node_agree_without_it_and_a_lost_node_0_moves_the_round(stores):
    prev = form_all(stores, range(4), None, {})[0]
    stores.up.discard(0)  # node 0, which held the first round, is gone
    gens = form_all(stores, (1, 2, 3), prev, {1: 7, 2: 7, 3: 7})
    g = gens[1]
    assert all(x == g for x in gens.values()) and g.nodes == (1, 2, 3) and g.left == (0,) and g.round_node == 1
    # Node 0 created again: a new store under the same address, not the member it was.
    stores.start(0, "boot0-again")
    r = Rounds(stores, 1, 0, 1, 2, 4, "boot1")
    assert r.coordinator(prev) == 1 and r.coordinator(g) == 1


class FrozenStores(FakeStores):
    """As FakeStores, and nodes in `frozen` are paused: their kernel takes a connection
    (`alive`), nothing answers (`answers`), and a call to their store is recorded (a real one
    would hold the caller: the kind tier's survivor of a paused node, stuck after its step)."""

    def __init__(self, max_nodes):
        super().__init__(max_nodes)
        self.frozen: set[int] = set()
        self.called: list[int] = []

    def answers(self, node, timeout=0):
        return node in self.up and node not in self.frozen

    def store(self, node):
        if node in self.frozen:
            self.called.append(node)
            raise TimeoutError(f"node {node} is frozen")
        return super().store(node)


def test_survivors_of_a_frozen_node_never_call_its_store():
    stores = FrozenStores(4)
    for n in range(4):
        stores.start(n, f"boot{n}")
    prev = form_all(stores, range(4), None, {})[0]
    stores.frozen.add(0)  # node 0, which held the round, paused; the watchers judged it lost
    stores.announce(prev.nodes, f"fail/{prev.number}")
    gens = form_all(stores, (1, 2, 3), prev, {1: 7, 2: 7, 3: 7}, extra={"lost": (0,)})
    assert {g.nodes for g in gens.values()} == {(1, 2, 3)} and gens[1].round_node == 1
    assert stores.called == [], stores.called
    assert all(stores.backing[n].check([f"fail/{prev.number}"]) for n in (1, 2, 3))


class ReplacedStores(FakeStores):
    """As FakeStores, with clients as a worker has them: each kept per worker (thread) and
    bound to the store it connected to, failing once that store is gone. A node created
    again (`start`) serves a new, empty store at the same address; a get of a key it lacks
    waits out the store's timeout, as a TCPStore's does."""

    def __init__(self, max_nodes):
        self._local = threading.local()
        super().__init__(max_nodes)

    @property
    def clients(self):
        if not hasattr(self._local, "clients"):
            self._local.clients = {}
        return self._local.clients

    @clients.setter
    def clients(self, value):
        pass  # per thread (above)

    def start(self, node, boot):
        super().start(node, boot)
        self.backing[node].set_timeout(datetime.timedelta(seconds=0.5))

    def store(self, node):
        if node not in self.clients:
            if node not in self.up:
                raise ConnectionRefusedError(f"node {node} is down")
            self.clients[node] = self._Client(self, node)
        return self.clients[node]

    class _Client:
        def __init__(self, stores, node):
            self.stores, self.node, self.backing = stores, node, stores.backing[node]

        def __getattr__(self, name):
            if self.stores.backing.get(self.node) is not self.backing:
                raise ConnectionResetError(f"node {self.node}'s store is gone")
            return getattr(self.backing, name)


def test_members_whose_round_holder_is_created_again_mid_round_move_the_round(monkeypatch):
    """Node 0 held the round and its Pod was deleted and created again while the members
    waited in it (the elastic system test's hang: the survivors' clients reconnected to the
    new Pod's empty store at the same address and waited there for good). The round moves
    to node 1 and closes without node 0, whose new Pod is not the member it was."""
    monkeypatch.setattr(roster, "ROUND_WAIT", 1.0)
    stores = ReplacedStores(4)
    for n in range(4):
        stores.start(n, f"boot{n}")
    prev = form_all(stores, range(4), None, {})[0]
    old = stores.backing[0]

    def replace_once_arrived():
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if old.check(["r2/in"]) and len(old.get("r2/in").splitlines()) == 3:
                stores.start(0, "boot0-again")
                return
            time.sleep(0.01)

    replacer = threading.Thread(target=replace_once_arrived)
    replacer.start()
    gens = form_all(stores, (1, 2, 3), prev, {1: 7, 2: 7, 3: 7}, deadline_s=20)
    replacer.join()
    assert stores.backing[0] is not old, "the members never arrived in node 0's round"
    assert {g.nodes for g in gens.values()} == {(1, 2, 3)} and gens[1].round_node == 1, gens


def test_a_newcomer_waits_for_the_members_and_takes_their_state(stores):
    prev = Generation(1, (0, 1), 1, ("boot0", "boot1"), (3, 3), 0)
    result = {}

    def newcomer():
        r = Rounds(stores, 2, 0, 1, 1, 4, "boot2")
        result["gen"] = r.form(prev, -1, r.clock() + 10)

    t = threading.Thread(target=newcomer)
    t.start()
    # It asked the members to come (change/1 in their stores) and did not close alone,
    # although the minimum is 1.
    for _ in range(200):
        if stores.backing[0].check(["change/1"]) and stores.backing[1].check(["change/1"]):
            break
        threading.Event().wait(0.02)
    assert stores.backing[0].check(["change/1"]) and "gen" not in result
    gens = form_all(stores, (0, 1), prev, {0: 5, 1: 5}, min_nodes=1)
    t.join(10)
    assert result["gen"] == gens[0] and result["gen"].nodes == (0, 1, 2)
    assert result["gen"].source == 0 and result["gen"].needs_state


@pytest.mark.parametrize("stopping", [True, False])
def test_a_node_left_out_while_it_is_stopping_leaves_and_one_that_is_not_comes_back(stores, stopping):
    """Its Pod deleted: the operator's notice reached the others (lost 2) before its own
    vote to leave; the others re-form without it. Stopping, it goes (LeftOut) instead of
    joining again as a newcomer; not stopping (a wrong notice), it asks to come back."""
    prev = form_all(stores, range(4), None, {})[0]
    result = {}

    def node_2():
        r = Rounds(stores, 2, 0, 1, 2, 4, "boot2")
        try:
            result["gen"] = r.form(prev, 7, r.clock() + 3, stopping=lambda: stopping)
        except Exception as e:  # noqa: BLE001 - asserted below
            result["error"] = e

    t = threading.Thread(target=node_2)
    t.start()
    gens = form_all(stores, (0, 1, 3), prev, {0: 7, 1: 7, 3: 7}, extra={"lost": (2,)})
    t.join(10)
    assert gens[0].nodes == (0, 1, 3) and gens[0].number == 2
    if stopping:
        assert isinstance(result.get("error"), LeftOut), result
        assert not stores.backing[0].check(["change/2"])  # it did not ask to be taken back
    else:  # a newcomer of generation 2 that no member came for before its deadline
        assert isinstance(result.get("error"), NoGroup) and stores.backing[0].check(["change/2"]), result


def test_a_kept_client_of_a_pod_created_again_is_made_again_once():
    """Node 0's Pod was replaced (a new store at the same name): the client kept from the
    old one fails, and a fresh one reads the new store's boot. Without that, nodes 1 and 3
    held the next round in node 1's store while node 0 held it in its own."""

    class Gone:
        def get(self, key):
            raise ConnectionResetError("Broken pipe")

    class Fresh:
        def get(self, key):
            return b"boot0-again"

    made = []
    stores = node_stores.NodeStores("127.0.0.1:1", 4, lambda host, port: made.append(port) or Fresh())
    stores.alive = lambda node, timeout=0: node == 0
    stores.clients[0] = Gone()
    assert stores.boot(0) == "boot0-again" and len(made) == 1
    stores.clients[1] = Gone()  # a node that does not answer: absent, no new client
    assert stores.call(1, lambda s: s.get("boot"), "absent") == "absent" and len(made) == 1
    stores.clients[0] = Gone()  # an op that must not run twice is not retried
    assert stores.call(0, lambda s: s.get("boot"), "absent", retry=False) == "absent" and len(made) == 1


def test_a_frozen_node_does_not_answer_though_its_kernel_accepts_the_connection(monkeypatch):
    """A paused or hung node's kernel still completes the TCP handshake on its launcher's
    ports, so a probe that only connects takes it for alive (the kind tier's paused node: the
    survivors waited out ROUND_WAIT); `answers` asks the launcher's HTTP endpoint, which a
    frozen launcher leaves unanswered and a live one answers."""
    import http.server
    import socket as socketlib
    import time

    from ddpjob import contract
    from ddpjob_trainer.node_stores import NodeStores

    store = socketlib.create_server(("127.0.0.1", 0))  # a store port that accepts
    frozen = socketlib.create_server(("127.0.0.1", 0))  # listens; nobody ever reads or answers
    live = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=live.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv(contract.PROGRESS_PORT, str(frozen.getsockname()[1]))
        stores = NodeStores("job-{index}.job.ns.svc:1", 2)
        stores.address = lambda node: store.getsockname()
        assert stores.alive(1)  # the handshake alone says nothing
        started = time.monotonic()
        assert stores.answers(1, timeout=0.5) is False
        assert time.monotonic() - started < 3  # a deadline, not a speed claim: well under ROUND_WAIT
        stores.launcher_port = live.server_address[1]
        assert stores.answers(1, timeout=5) is True  # any answer (here a 501) is a launcher that runs
        # Under `ddpjob run` a node's launcher binds another address than its store's: not asked.
        assert NodeStores("127.0.0.1:1", 2).launcher_port is None
        monkeypatch.setenv(contract.PROGRESS_PORT, "")
        assert NodeStores("job-{index}.job.ns.svc:1", 2).launcher_port is None
    finally:
        live.shutdown()
        live.server_close()
        frozen.close()
        store.close()


def test_a_nodes_own_store_is_reached_at_its_loopback_address_not_its_name():
    """In a cluster a node's own store is asked at 127.0.0.1: a Pod created again under the
    name of one on a lost node starts while DNS still gives its predecessor's address or none
    (the kind tier's node_elastic once failed there: the rejoining Pod's first look at its own
    store went to its stale name, and the job failed as bad input). The others still use the
    name; on one machine every address is the template's own."""
    from ddpjob_trainer.node_stores import LOOPBACK, NodeStores

    named = NodeStores("job-{index}.job.ns.svc:29500", 3, own=1)
    assert named.address(1) == (LOOPBACK, 29500)
    assert named.address(0) == ("job-0.job.ns.svc", 29500)
    assert named.address(2) == ("job-2.job.ns.svc", 29500)
    assert NodeStores("job-{index}.job.ns.svc:29500", 3).address(1) == ("job-1.job.ns.svc", 29500)
    local = NodeStores("127.0.0.5:29500", 3, own=1)  # `ddpjob run`: node i binds 127.0.0.5+i
    assert local.address(1) == ("127.0.0.6", 29500)

    asked = []
    stores = NodeStores("job-{index}.job.ns.svc:29500", 3, lambda host, port: asked.append(host) or None, own=2)
    stores.store(2), stores.store(0)
    assert asked == [LOOPBACK, "job-0.job.ns.svc"]
