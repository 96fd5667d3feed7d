"""The notices to an elastic job's Pods (ddpjob.notice) and the nodes' addresses
(contract.node_address): pure, shared by the operator, `ddpjob run` and the trainer."""

import pytest

from ddpjob import contract, notice

TOKEN = notice.job_token(b"key", "ns", "job", "uid-1")


def test_an_authentic_fresh_notice_is_taken_once():
    guard = notice.ReplayGuard()
    body = notice.encode([2, 0, 2], 1000.0)
    assert notice.verify(TOKEN, body, notice.sign(TOKEN, body), 1001.0, guard) == (0, 2)
    with pytest.raises(notice.NoticeError) as e:
        notice.verify(TOKEN, body, notice.sign(TOKEN, body), 1002.0, guard)
    assert e.value.status == 409  # a replay


@pytest.mark.parametrize(
    "case, status",
    [
        ("other job's token", 401),
        ("no signature", 401),
        ("stale", 400),
        ("too big", 413),
        ("no token here", 404),
        ("not json", 400),
        ("indices", 400),
        ("too many", 400),
    ],
)
def test_what_a_pod_refuses(case, status):
    body, token, signer, now = notice.encode([1], 1000.0), TOKEN, TOKEN, 1000.0
    if case == "other job's token":
        signer = notice.job_token(b"key", "ns", "job", "uid-2")  # the same name, another object
    if case == "stale":
        now += notice.MAX_AGE + 1
    if case == "too big":
        body = b"{" + b" " * notice.MAX_BODY + b"}"
    if case == "no token here":
        token = None
    if case == "not json":
        body = b"lost: 1"
    if case == "indices":
        body = b'{"lost": [-1, "2"], "time": 1000}'
    if case == "too many":
        body = notice.encode(list(range(notice.MAX_LOST)), 1000.0).replace(b"[0,", b"[999999, 0,")
    signature = None if case == "no signature" else notice.sign(signer, body)
    with pytest.raises(notice.NoticeError) as e:
        notice.verify(token, body, signature, now, notice.ReplayGuard())
    assert e.value.status == status


def test_the_replay_memory_is_bounded():
    guard = notice.ReplayGuard(limit=3)
    for i in range(10):
        assert guard.first(f"d{i}", 1000.0)
    assert len(guard.seen) == 3 and guard.first("d0", 1000.0)  # forgotten: bounded, not replay-proof for ever


def test_node_addresses_from_a_cluster_template_and_from_a_loopback_base():
    assert contract.node_address("job-{index}.job.ns.svc:29500", 3) == ("job-3.job.ns.svc", 29500)
    assert contract.node_address("127.4.0.1:41000", 0) == ("127.4.0.1", 41000)
    assert contract.node_address("127.4.0.255:41000", 2) == ("127.4.1.1", 41000)
    for bad in ("job-{index}", "job:port", ":1", "127.0.0:5", "255.255.255.255:1"):
        with pytest.raises(ValueError, match=contract.NODE_ADDRESS):
            contract.node_address(bad, 1)
