"""The operator's progress poller alone (fake fetches, no HTTP) and its use by the controller:
bounded reads, a reconcile only on change, every Pod read once when a stall is suspected,
status.progress written only when it changed, a Stalled restart.

The fetches run on the poller's threads: a test waits for the reads it needs (`until`),
never for a time in which it hopes they happened; only the rate caps are checked against
the time the reads really took."""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

import pytest

from ddpjob.operator import controller as ctl
from ddpjob.operator.kube import Kube
from ddpjob.operator.progress import ProgressPoller, Target, TokenBucket
from tests.operator.test_controller import NOW, FakeKube, job_body, pod
from tests.support.deadlines import REACTION

pytestmark = pytest.mark.timeout(2 * REACTION)


def snap(step: int, since: float = 0.0, ranks: dict | None = None) -> dict:
    return {
        "record": {"step": step, "total_steps": 100, "epoch": 1, "total_epochs": 2, "time": 1.0e9},
        "seconds_since_progress": since,
        "eta_seconds": 60,
        "ranks": ranks or {},
    }


class Fetches:
    def __init__(self, answers: dict[str, Any]):
        self.answers = answers
        self.urls: list[str] = []

    def __call__(self, url: str) -> Any:
        self.urls.append(url)
        answer = self.answers[url.split("//")[1].split(":")[0]]
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_token_bucket_allows_a_burst_then_the_rate() -> None:
    now = [0.0]
    bucket = TokenBucket(rate=10, burst=3, clock=lambda: now[0])
    assert [bucket.wait_time() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.wait_time() == pytest.approx(0.1)
    now[0] += 0.1
    assert bucket.wait_time() == 0.0 and bucket.wait_time() > 0


async def poll_for(poller: ProgressPoller, seconds: float) -> None:
    await asyncio.sleep(seconds)
    await poller.close()


async def until(condition: Any, what: str) -> None:
    """Let the poller run until `condition()` holds (a bound only against a hang)."""
    deadline = time.monotonic() + REACTION
    while not condition():
        assert time.monotonic() < deadline, f"{what} within {REACTION}s"
        await asyncio.sleep(0.01)


def test_a_reconcile_is_asked_for_only_when_the_record_changes() -> None:
    triggered: list = []
    fetch = Fetches({"10.0.0.1": snap(5)})

    async def go():
        poller = ProgressPoller(triggered.append, interval=0.02, jitter=0.0, fetch=fetch)
        poller.watch(("ns", "j"), Target(0, ("10.0.0.1",), None))
        await until(lambda: len(fetch.urls) >= 4, "3 reads after the first")  # polled again and again ...
        assert triggered == [("ns", "j")]  # ... but only the first read was news
        assert poller.take(("ns", "j")).record["step"] == 5 and poller.take(("ns", "j")) is None
        fetch.answers["10.0.0.1"] = snap(6)
        await until(lambda: len(triggered) >= 2, "the new record handed over")
        read = len(fetch.urls)
        await until(lambda: len(fetch.urls) >= read + 3, "3 more reads")
        assert triggered == [("ns", "j")] * 2
        poller.unwatch(("ns", "j"))
        before = len(fetch.urls)
        await poll_for(poller, 0.1)
        assert len(fetch.urls) <= before + 1  # at most the read in flight

    asyncio.run(go())
    assert fetch.urls[0] == "http://10.0.0.1:29510/progress"


def test_a_suspected_stall_reads_every_pod_once_to_name_ranks() -> None:
    triggered: list = []
    fetch = Fetches(
        {
            "10.0.0.1": snap(5, since=30, ranks={"0": {"step": 6}, "1": {"step": 6}}),
            "10.0.0.2": snap(0, ranks={"2": {"step": 5}, "3": {"step": 6}}),
        }
    )

    async def go():
        poller = ProgressPoller(triggered.append, interval=10, jitter=0.0, fetch=fetch)
        poller.watch(("ns", "j"), Target(0, ("10.0.0.1", "10.0.0.2"), stall_timeout=20))
        await asyncio.sleep(0)
        poller._schedule(("ns", "j"), 0)  # now rather than somewhere in the first interval
        await until(lambda: triggered, "the suspected stall handed over")
        state = poller.take(("ns", "j"))
        await poller.close()
        return state

    state = asyncio.run(go())
    assert sorted(u.split("//")[1].split(":")[0] for u in fetch.urls) == ["10.0.0.1", "10.0.0.2"]
    assert {r: b["step"] for r, b in state.ranks.items()} == {0: 6, 1: 6, 2: 5, 3: 6}
    assert triggered == [("ns", "j")]


def test_a_pod_that_does_not_answer_is_no_news() -> None:
    triggered: list = []
    fetch = Fetches({"10.0.0.1": OSError("connection refused"), "10.0.0.9": {"ranks": "garbage"}})

    async def go():
        poller = ProgressPoller(triggered.append, interval=0.02, jitter=0.0, fetch=fetch)
        poller.watch(("ns", "j"), Target(0, ("10.0.0.1",), 10))
        poller.watch(("ns", "k"), Target(0, (None,), 10))  # no Pod IP yet: nothing to read
        poller.watch(("ns", "m"), Target(0, ("10.0.0.9",), 10))  # a malformed answer
        await until(
            lambda: sum("10.0.0.9" in u for u in fetch.urls) > 1 and any("10.0.0.1" in u for u in fetch.urls),
            "both Pods read, the malformed one twice",
        )
        await poller.close()
        return poller

    poller = asyncio.run(go())
    assert triggered == [] and poller.failures == len(fetch.urls) > 0
    assert {u.split("//")[1].split(":")[0] for u in fetch.urls} == {"10.0.0.1", "10.0.0.9"}
    assert sum("10.0.0.9" in u for u in fetch.urls) > 1  # still polled after the bad answer


def test_many_jobs_are_read_no_faster_than_the_global_cap() -> None:
    fetch = Fetches({f"10.0.{i // 250}.{i % 250}": snap(1) for i in range(500)})

    async def go():
        poller = ProgressPoller(lambda key: None, interval=0.01, max_per_second=100, fetch=fetch)
        start = time.monotonic()
        for i in range(500):
            poller.watch(("ns", f"j{i}"), Target(0, (f"10.0.{i // 250}.{i % 250}",), None))
        await poll_for(poller, 0.5)
        return time.monotonic() - start

    elapsed = asyncio.run(go())
    # A burst of 100, then 100 per second: each job alone would be read every 10 ms.
    assert 0 < len(fetch.urls) <= 100 + 100 * elapsed + 1


class Advancing:
    """Every read finds a record that moved on (the worst case for status writes)."""

    def __init__(self, since: float = 0.0):
        self.reads, self.since = 0, since

    def __call__(self, url: str) -> Any:
        self.reads += 1
        return snap(self.reads, since=self.since)


@pytest.mark.parametrize("writes_per_second, at_most", [(1000, None), (100, 0.1)])
def test_changed_records_are_handed_over_at_most_once_per_write_interval(writes_per_second, at_most) -> None:
    triggered: list = []
    fetch = Advancing()
    jobs = [("ns", f"j{i}") for i in range(10)]

    async def go():
        poller = ProgressPoller(
            triggered.append,
            interval=0.02,
            jitter=0.0,
            max_per_second=1000,
            max_writes_per_second=writes_per_second,
            fetch=fetch,
        )
        for i, key in enumerate(jobs):
            poller.watch(key, Target(0, (f"10.0.0.{i}",), None))
        # 10 jobs at 100 writes/s: each job's record at most every 0.1 s, read every 0.02 s.
        assert poller.write_interval() == pytest.approx(at_most or 0.02)
        start = time.monotonic()
        await until(lambda: fetch.reads > 11 * len(jobs) and time.monotonic() - start > 0.3, "11 reads a job")
        await poller.close()
        return time.monotonic() - start

    elapsed = asyncio.run(go())
    per_job = [triggered.count(key) for key in jobs]
    reads_per_job = fetch.reads / len(jobs)
    assert reads_per_job > 10
    if at_most is None:
        assert min(per_job) >= reads_per_job / 2  # every read is news and is handed over
    else:
        assert 1 <= max(per_job) <= elapsed / at_most + 1  # the first record, then the cap
        assert min(per_job) >= 2
        # All jobs together: their first records, then no more than the rate (and its burst).
        assert len(triggered) <= len(jobs) + writes_per_second * (elapsed + 1)


def test_hand_overs_never_exceed_the_write_rate_even_when_many_are_due_at_once() -> None:
    triggered: list = []
    fetch = Advancing()
    jobs = [("ns", f"j{i}") for i in range(50)]

    async def go():
        # 50 jobs, 1 write/s: write interval 50 s, but after the first records no job is
        # due before 50 s, so none is handed over again within this test ...
        poller = ProgressPoller(
            triggered.append, interval=0.01, jitter=0.0, max_per_second=10000, max_writes_per_second=1, fetch=fetch
        )
        for i, key in enumerate(jobs):
            poller.watch(key, Target(0, (f"10.0.1.{i}",), None))
        await until(lambda: len(triggered) >= len(jobs), "every job's first record")
        await asyncio.sleep(0.1)
        assert sorted(triggered) == sorted(jobs)
        # ... and when all are due at once, the bucket lets one through per second.
        poller._delivered_at.clear()
        start = time.monotonic()
        await poll_for(poller, 0.5)
        return time.monotonic() - start

    elapsed = asyncio.run(go())
    assert len(triggered) - len(jobs) <= 2 + int(elapsed)


def test_a_suspected_stall_is_handed_over_whatever_the_write_cap() -> None:
    triggered: list = []
    fetch = Advancing(since=60)

    async def go():
        poller = ProgressPoller(triggered.append, interval=0.02, jitter=0.0, max_writes_per_second=0.1, fetch=fetch)
        poller.watch(("ns", "j"), Target(0, ("10.0.0.1",), stall_timeout=30))
        await until(lambda: fetch.reads >= 4, "4 reads")
        await poller.close()

    asyncio.run(go())
    assert len(triggered) >= 3 and len(triggered) >= fetch.reads - 1  # every read (but one in flight)


def make_controller(body: dict, pods: list, states: list) -> tuple[ctl.Controller, FakeKube, list]:
    # The calls the controller makes, answered in memory: a FakeKube and a poller that
    # hands out the given states.
    class StubPoller:
        def __init__(self):
            self.watched: dict = {}

        def take(self, key):
            return states.pop(0) if states else None

        def watch(self, key, target):
            self.watched[key] = target

        def unwatch(self, key):
            self.watched.pop(key, None)

    kube, events = FakeKube(), []
    c = ctl.Controller(
        cast(Kube, kube),
        job_body=lambda ns, n: body,
        pods_of=lambda ns, n: pods,
        post_event=lambda b, t, r, m: events.append((t, r, m)),
        clock=lambda: NOW,
        poller=cast(ProgressPoller, StubPoller()),
    )
    return c, kube, events


def test_the_controller_writes_progress_only_when_it_changed_and_restarts_a_stall() -> None:
    from ddpjob.job.stall import ProgressState

    body = job_body(nodes=2, stallTimeoutSeconds=60)
    body["status"] = {"phase": "Running", "restarts": 0, "startTime": "2026-01-01T00:00:00Z"}
    states = [
        ProgressState.from_snapshot(snap(5), 0),
        ProgressState.from_snapshot(snap(5, since=30), 0),
        ProgressState.from_snapshot(snap(5, since=61, ranks={"0": {"step": 6}, "1": {"step": 5}}), 0),
    ]
    c, kube, events = make_controller(body, [pod(0, ip="10.0.0.1"), pod(1, ip="10.0.0.2")], states)

    async def go():
        return [await c.reconcile(("ns", "j")) for _ in range(3)]

    asyncio.run(go())
    writes = [p for kind, p in kube.calls if kind == "status"]
    assert writes[0]["progress"]["summary"] == "epoch 1/2 step 5/100 (5%)" and writes[0]["progress"]["eta"] == "1m00s"
    assert len(writes) == 2  # the second read brought nothing new: no write
    assert writes[1]["phase"] == "Restarting" and writes[1]["lastFailure"]["reason"] == "Stalled"
    assert [r for _, r, _ in events] == ["Stalled", "Restarting"]
    assert "rank(s) 1 stopped at step 5" in events[0][2]
    assert [k for k, _ in kube.calls].count("delete") == 2
    assert cast(Any, c.poller).watched == {}  # not Running any more: not polled


def test_a_running_job_is_watched_at_its_pod_ips() -> None:
    body = job_body(nodes=2, stallTimeoutSeconds=60)
    c, _, _ = make_controller(body, [pod(0, ip="10.0.0.1"), pod(1, ip="10.0.0.2")], [])
    asyncio.run(c.reconcile(("ns", "j")))
    assert cast(Any, c.poller).watched[("ns", "j")] == Target(0, ("10.0.0.1", "10.0.0.2"), 60, world_size=2)


def test_status_writes_do_not_run_the_job_event_handler() -> None:
    """Every status.progress write comes back as a MODIFIED event: kopf filters it out
    before running (and logging) a handler; only a deletion reaches `forget`."""
    from ddpjob.operator import handlers

    assert handlers._deleted(type="DELETED") and not handlers._deleted(type="MODIFIED")
    assert not handlers._deleted(type=None)  # kopf's initial listing


def test_the_operators_progress_settings_come_from_its_env_within_bounds(monkeypatch) -> None:
    import logging

    from ddpjob.operator import handlers, settings

    log = logging.getLogger("test")

    def poller(env):
        return handlers._progress_poller(settings.from_env(env), lambda key: None, log)

    assert (poller({}).interval, poller({}).max_writes_per_second) == (30.0, 5.0)
    assert poller({settings.PROGRESS_WRITES_ENV: "0.5"}).max_writes_per_second == 0.5
    for bad, says in (("5000", "within [0.1, 1000]"), ("fast", "is not a number"), ("0", "cannot be turned off")):
        with pytest.raises(settings.SettingsError, match=settings.PROGRESS_WRITES_ENV) as err:
            poller({settings.PROGRESS_WRITES_ENV: bad})
        assert says in str(err.value)
    # polling off: no write cap to check
    assert poller({settings.PROGRESS_INTERVAL_ENV: "0", settings.PROGRESS_WRITES_ENV: "0"}) is None


def test_a_jobs_first_look_comes_within_the_time_the_rate_needs_for_all_not_a_whole_interval() -> None:
    """A replica that comes to lead watches the running jobs afresh: with few of them, each
    is first read within a second (the status moves again at once); with many, the first
    looks spread over what the global rate needs to read them all, at most the interval."""

    def first_looks(jobs: int) -> list[float]:
        poller = ProgressPoller(
            lambda key: None, interval=30.0, max_per_second=50, fetch=Fetches({}), clock=lambda: 0.0
        )
        poller.start = lambda: None  # type: ignore[method-assign]  # no loop: only the schedule is read
        for i in range(jobs):
            poller.watch(("ns", f"j{i}"), Target(0, (f"10.0.0.{i % 250}",), None))
        return sorted(due for due, _, _ in poller._due)

    few = first_looks(3)
    assert len(few) == 3 and max(few) <= 1.0
    many = first_looks(5000)  # 100 s at 50 reads a second: the interval bounds it
    assert max(many) <= 30.0 and max(many) > 20.0  # spread over the interval, as before
    assert sum(due <= 1.0 for due in many) < 500  # not all at once
