"""An elastic job's lost index comes back after a backoff that doubles with each loss in
a row of that index (restartBackoffSeconds, 2x, 4x, ... at most 300 s), counted in
status.lostIndices so that an operator restart (which knows only the status) keeps it,
and reset once the index's Pod has run for 10 minutes. Pure: lifecycle.decide, the plan
the operator and `ddpjob run` both follow."""

from datetime import timedelta

from ddpjob.job import lost_indices
from tests.job.test_elastic import T0, decide, job, pod, running_status


def s(seconds):
    return T0 + timedelta(seconds=seconds)


def lose(j, st, rank, at, ranks=range(4)):
    """Index `rank` fails at `at` and is gone a moment later; (plan of the step it is gone, its status)."""
    others = [pod(r) for r in ranks if r != rank]
    p = decide(j, [*others, pod(rank, "Failed", exit_code=137)], st, now=at)
    p = decide(j, others, p.status, now=at + timedelta(seconds=1))
    return p


def comes_back(j, st, rank, at, ranks=range(4)):
    """The index is created again at `at` (asserted), and its Pod is seen Pending then Running."""
    others = [pod(r) for r in ranks if r != rank]
    p = decide(j, others, st, now=at)
    assert p.create == (rank,), (p.create, p.status["message"])
    p = decide(j, [*others, pod(rank, "Pending")], p.status, now=at + timedelta(seconds=1))
    return decide(j, [*others, pod(rank)], p.status, now=at + timedelta(seconds=2))


def test_a_pod_that_keeps_failing_waits_twice_as_long_each_time_up_to_the_cap():
    j = job(restartBackoffSeconds=10)
    st, t, waits = running_status(j), 0, []
    for _ in range(7):
        p = lose(j, st, 2, s(t))
        waits.append(p.requeue_after + 1)  # counted from the loss, seen 1 s before
        p = comes_back(j, p.status, 2, s(t + waits[-1]))
        st, t = p.status, t + waits[-1] + 30  # it runs 30 s, then fails again
    assert waits == [10, 20, 40, 80, 160, 300, 300]
    assert st[lost_indices.FIELD] == [
        {
            "index": 2,
            "losses": 7,
            "lostAt": "2026-01-01T00:13:10Z",
            "replaced": True,
            "runningSince": "2026-01-01T00:18:12Z",
        }
    ]


def test_not_before_its_wait_and_the_message_and_event_say_it():
    j = job(restartBackoffSeconds=10)
    p = comes_back(j, lose(j, running_status(j), 1, s(0)).status, 1, s(10))
    first = decide(j, [pod(0), pod(1, "Failed", exit_code=137), pod(2), pod(3)], p.status, now=s(100))
    (event,) = first.events
    assert event.reason == "NodeLost" and event.message.endswith(
        "; creating demo-1 again in 20s (lost 2 times in a row)"
    )
    gone = decide(j, [pod(0), pod(2), pod(3)], first.status, now=s(110))
    assert gone.create == () and gone.requeue_after == 10.0
    assert "replacing demo-1 in 10s (lost 2 times in a row)" in gone.status["message"]
    assert decide(j, [pod(0), pod(2), pod(3)], gone.status, now=s(120)).create == (1,)


def test_an_operator_restart_keeps_the_count_it_reads_from_the_status():
    j = job(restartBackoffSeconds=10)
    p = comes_back(j, lose(j, running_status(j), 3, s(0)).status, 3, s(10))
    st = lose(j, p.status, 3, s(50)).status
    # A new operator process knows nothing but the stored status: the same wait, 20 s.
    stored = {k: v for k, v in st.items()}
    again = decide(j, [pod(0), pod(1), pod(2)], stored, now=s(60))
    assert again.create == () and again.requeue_after == 10.0
    assert again.status[lost_indices.FIELD][0]["losses"] == 2


def test_each_index_has_its_own_count():
    j = job(restartBackoffSeconds=10)
    p = comes_back(j, lose(j, running_status(j), 2, s(0)).status, 2, s(10))
    p = lose(j, p.status, 2, s(50))  # index 2: its second loss, 20 s
    assert p.requeue_after == 19.0
    # Index 0 (Pod 0, the store's) fails now too: its first loss, 10 s.
    p = decide(j, [pod(0, "Failed", exit_code=137), pod(1), pod(3)], p.status, now=s(52))
    p = decide(j, [pod(1), pod(3)], p.status, now=s(53))
    assert p.requeue_after == 9.0
    assert [(e["index"], e["losses"]) for e in p.status[lost_indices.FIELD]] == [(0, 1), (2, 2)]
    p = decide(j, [pod(1), pod(3)], p.status, now=s(62))
    assert p.create == (0,)


def test_ten_minutes_running_resets_the_count():
    j = job(restartBackoffSeconds=10)
    p = comes_back(j, lose(j, running_status(j), 2, s(0)).status, 2, s(10))
    running_from = p.status[lost_indices.FIELD][0]["runningSince"]
    assert running_from == "2026-01-01T00:00:12Z"
    # The operator is woken when the index counts as healthy; the entry then goes.
    assert p.requeue_after == 600.0
    healthy = decide(j, [pod(r) for r in range(4)], p.status, now=s(612))
    assert lost_indices.FIELD not in healthy.status and healthy.events == ()
    p = lose(j, healthy.status, 2, s(700))
    assert p.requeue_after == 9.0 and p.status[lost_indices.FIELD][0]["losses"] == 1
    # Running, but for less than 10 minutes: the count stays.
    p = comes_back(j, p.status, 2, s(710))
    p = lose(j, decide(j, [pod(r) for r in range(4)], p.status, now=s(1000)).status, 2, s(1100))
    assert p.requeue_after == 19.0


def test_an_index_new_to_the_job_is_created_at_once():
    st = running_status(job(nodes=3, restartBackoffSeconds=60), range(3))
    p = decide(job(nodes=4, restartBackoffSeconds=60), [pod(r) for r in range(3)], st)
    assert p.create == (3,) and lost_indices.FIELD not in p.status


def test_a_gang_restart_starts_without_counts():
    j = job(lo=3, restartBackoffSeconds=10)
    st = lose(j, running_status(j), 1, s(0)).status
    assert lost_indices.FIELD in st
    p = decide(j, [pod(0), pod(2, "Failed", exit_code=137), pod(3)], st, now=s(2))
    assert p.status["phase"] == "Restarting" and lost_indices.FIELD not in p.status


def test_a_hand_edited_entry_is_ignored():
    j = job(restartBackoffSeconds=10)
    st = running_status(j)
    st[lost_indices.FIELD] = [
        {"index": 1, "losses": "many", "lostAt": "x"},
        {"index": 2, "losses": 10**9, "lostAt": "2026-01-01T00:00:00"},
        {"index": 3, "losses": 10**9, "lostAt": "2026-01-01T00:00:00Z", "replaced": True},
    ]
    p = lose(j, st, 1, s(0))
    assert p.requeue_after == 9.0
    p = lose(j, st, 3, s(0))  # a huge count only means the cap
    assert p.requeue_after == 299.0
