"""Count-only status writes wait a little (pure rule); anything else is written at once."""

import pytest

from ddpjob.job import count_writes

PENDING = {
    "phase": "Pending",
    "message": "0/1024 nodes running",
    "readyNodes": 0,
    "scheduledNodes": 0,
    "conditions": [],
}


def moved(**changes):
    return {**PENDING, **changes}


def test_only_counts_moved():
    assert count_writes.counts_only(
        PENDING, moved(readyNodes=396, scheduledNodes=396, message="396/1024 nodes running")
    )
    assert not count_writes.counts_only(PENDING, PENDING)  # nothing to write at all
    assert not count_writes.counts_only(PENDING, moved(phase="Running", readyNodes=1024))
    assert not count_writes.counts_only(PENDING, moved(readyNodes=1, conditions=[{"type": "Running"}]))
    assert not count_writes.counts_only(PENDING, {k: v for k, v in PENDING.items() if k != "conditions"})


def test_a_conditions_message_that_moved_with_the_counts_is_a_count():
    gang = {"type": "GangScheduled", "status": "False", "reason": "Pending", "lastTransitionTime": "t0"}
    before = moved(conditions=[{**gang, "message": "Scheduled 173/1024: not yet scheduled"}])
    after = moved(
        scheduledNodes=217,
        message="Scheduled 217/1024",
        conditions=[{**gang, "message": "Scheduled 217/1024: not yet scheduled"}],
    )
    assert count_writes.counts_only(before, after)
    assert count_writes.wait(before, after, 1024, last_write=100.0, now=101.0) == pytest.approx(4.0)
    # Its reason, status or time moved, or a condition came or went: written at once.
    for changed in ({"reason": "Unschedulable"}, {"status": "True"}, {"lastTransitionTime": "t1"}):
        flipped = {**after, "conditions": [{**after["conditions"][0], **changed}]}
        assert not count_writes.counts_only(before, flipped), changed
    assert not count_writes.counts_only(before, {**after, "conditions": [*after["conditions"], {"type": "Running"}]})
    assert not count_writes.counts_only(before, {**after, "conditions": []})
    # A message that says something else (a queue's verdict gone) is no count.
    said = {**after, "conditions": [{**after["conditions"][0], "message": "Scheduled 217/1024: queue q: held"}]}
    assert not count_writes.counts_only(before, said)


@pytest.mark.parametrize("nodes, seconds", [(1, 0.2), (40, 0.2), (200, 1.0), (1024, 5.0), (100000, 5.0)])
def test_the_interval_grows_with_the_gang_and_is_bounded(nodes, seconds):
    assert count_writes.interval(nodes) == pytest.approx(seconds, abs=0.01)
    assert count_writes.MIN_INTERVAL <= count_writes.interval(nodes) <= count_writes.MAX_INTERVAL


def test_a_count_only_write_waits_for_the_rest_of_the_interval():
    new = moved(readyNodes=396, message="396/1024 nodes running")
    assert count_writes.wait(PENDING, new, 1024, last_write=100.0, now=101.0) == pytest.approx(4.0)
    assert count_writes.wait(PENDING, new, 1024, last_write=100.0, now=106.0) == 0.0
    assert count_writes.wait(PENDING, new, 1024, last_write=None, now=101.0) == 0.0  # none written yet
    assert count_writes.wait(PENDING, moved(phase="Running"), 1024, last_write=100.0, now=100.1) == 0.0
