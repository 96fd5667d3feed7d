"""A worker outside an in-place elastic group finding it (ddpjob_trainer.rounds): a Pod
created again under a lost node's name, or a node the others went on without. It must
not take its predecessor's place in an old generation, must not give up at one missed
probe, and must end quietly once the others finished."""

import threading

import pytest

from ddpjob_trainer.roster import Generation, NoGroup
from ddpjob_trainer.rounds import Rounds
from tests.trainer.roster_fakes import form_all, four_nodes


@pytest.fixture
def stores():
    return four_nodes()


def newcomer(stores, node=2, boot="boot2", patience=None):
    r = Rounds(stores, node, 0, 1, 1, 4, boot)
    if patience is not None:
        r.patience = patience
    return r


def in_thread(fn):
    out, errors = {}, []

    def run():
        try:
            out["gen"] = fn()
        except Exception as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    return t, out, errors


def test_a_newcomer_finds_no_group_when_no_member_answers_for_its_patience(stores):
    prev = Generation(3, (0, 1), 1, ("boot0", "boot1"), (3, 3), 0)
    stores.up -= {0, 1}
    r = newcomer(stores, patience=1.0)
    started = r.clock()
    with pytest.raises(NoGroup, match=r"generation 3 \(\[0, 1\]\) answers"):
        r.form(prev, -1, r.clock() + 20)
    assert r.clock() - started >= 1.0  # it looked again for a while, not once


def test_a_newcomer_whose_members_miss_a_probe_joins_when_they_answer_again(stores):
    """A loaded node's probe that misses once is no reason to fail the Pod (exit 142):
    it looks again, and joins the generation the members are in by then."""
    prev = Generation(1, (0, 1), 1, ("boot0", "boot1"), (3, 3), 0)
    stores.up -= {0, 1}
    r = newcomer(stores, patience=30.0)
    t, out, errors = in_thread(lambda: r.form(prev, -1, r.clock() + 20))
    threading.Event().wait(1.2)
    assert t.is_alive() and not errors, errors  # still looking
    stores.up |= {0, 1}
    for n in (0, 1):
        stores.backing[n].set("pointer", prev.text())
    while not all(stores.backing[n].check(["change/1"]) for n in (0, 1)):  # it arrived: the members come
        assert t.is_alive() and not errors, errors
        threading.Event().wait(0.02)
    gens = form_all(stores, (0, 1), prev, {0: 5, 1: 5}, min_nodes=1)
    t.join(10)
    assert not errors, errors
    assert out["gen"] == gens[0] and out["gen"].nodes == (0, 1, 2) and out["gen"].boot(2) == "boot2"


def test_a_pod_created_again_is_not_its_predecessor_in_an_old_generation(stores):
    """No member's pointer read (a new Pod's first lookups are slow): it goes to node 0's
    round 1, whose generation names node 2 with its predecessor's boot. That is not this
    node's group: it walks on as a newcomer to the generation the members are in now."""
    first = Generation(1, (0, 1, 2), 1, ("boot0", "boot1", "boot2"), (0, 0, 0), 0)
    second = Generation(2, (0, 1), 1, ("boot0", "boot1"), (9, 9), 0)
    stores.backing[0].set("r1/gen", first.text())
    stores.backing[0].set("r2/gen", second.text())
    r = newcomer(stores, boot="boot2-again")
    assert r.newest() is None  # nobody points anywhere yet: it starts from round 1
    t, out, errors = in_thread(lambda: r.form(None, -1, r.clock() + 20))
    while not stores.backing[0].check(["change/2"]):  # it reached round 3 and called the members
        assert t.is_alive() and not errors, (errors, out)
        threading.Event().wait(0.02)
    gens = form_all(stores, (0, 1), second, {0: 9, 1: 9}, min_nodes=1)
    t.join(10)
    assert not errors, errors
    assert out["gen"] == gens[0] and out["gen"].number == 3 and out["gen"].boot(2) == "boot2-again"


def test_a_newcomer_ends_at_once_when_nobody_answers_and_training_is_over(stores):
    prev = Generation(3, (0, 1), 1, ("boot0", "boot1"), (3, 3), 0)
    stores.up -= {0, 1}
    r = newcomer(stores, patience=30.0)
    done = []
    t, _out, errors = in_thread(lambda: r.form(prev, -1, r.clock() + 60, over=lambda: bool(done)))
    threading.Event().wait(0.8)
    assert t.is_alive()  # the others' last save not written yet: it keeps looking
    done.append(1)  # ...and now it is
    t.join(10)
    assert not t.is_alive() and len(errors) == 1 and "training is over" in str(errors[0])


def test_a_newcomer_with_nobody_up_waits_for_node_0_unless_training_is_over(stores):
    stores.up -= {0, 1, 3}  # only the newcomer's own node is up: node 0 not yet, or every node gone
    r = newcomer(stores)
    asked = []
    with pytest.raises(NoGroup, match="no group formed"):  # a first start: it waited the whole deadline
        r.form(None, -1, r.clock() + 1.5, over=lambda: asked.append(1) and False)
    assert len(asked) >= 2
    with pytest.raises(NoGroup, match="training is over"):  # came too late: it goes, not at the deadline
        r.form(None, -1, r.clock() + 30, over=lambda: True)


def test_the_newest_pointer_is_where_a_newcomer_goes(stores):
    old = Generation(1, (0, 1, 2, 3), 1, ("boot0", "boot1", "boot2", "boot3"), (0,) * 4, 0)
    new = Generation(2, (1, 2, 3), 1, ("boot1", "boot2", "boot3"), (0,) * 3, 1)
    stores.backing[1].set("pointer", new.text())
    stores.backing[2].set("pointer", old.text())
    stores.backing[3].set("pointer", "garbage")
    assert Rounds(stores, 0, 0, 1, 2, 4, "boot0-again").newest() == new


def test_looking_again_at_the_same_generation_keeps_its_lost_nodes_uncalled(stores):
    """A node judged lost (frozen: its kernel takes the connection, its store holds the
    caller) stays out of the search while the generation is the same one."""
    prev = Generation(4, (0, 1, 2), 1, ("boot0", "boot1", "boot2"), (7, 7, 7), 0)
    r = newcomer(stores, patience=1.0)
    asked = []
    r.coordinator = lambda p, lost=(): asked.append((p.number, tuple(lost))) and None
    r.newest = lambda: prev  # nobody moved on
    with pytest.raises(NoGroup, match="generation 4"):
        r.form(prev, 7, r.clock() + 20, lost=(0,))
    assert len(asked) >= 2 and set(asked) == {(4, (0,))}, asked
