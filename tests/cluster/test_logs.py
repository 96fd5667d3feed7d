"""The one merger of Pod logs (cluster/logs.py), against a stand-in for the API's log
streams: lines in the order they arrive, each with its Pod; one Pod's failure said after
the others ended; a reader that leaves early; a line with no end."""

from __future__ import annotations

import threading
from collections.abc import Generator
from typing import Any

import pytest

from ddpjob.cluster import logs
from ddpjob.cluster.connection import ClusterError, Connection

pytestmark = pytest.mark.timeout(30)


class Body:
    """A streamed HTTP body as urllib3 gives it: chunks, then the end (or a failure)."""

    def __init__(self, chunks: list[bytes], gate: threading.Event | None = None, fail: Exception | None = None):
        self.chunks, self.gate, self.fail, self.closed = chunks, gate, fail, False

    def stream(self, amount: int, decode_content: bool = True) -> Any:
        for i, chunk in enumerate(self.chunks):
            if i == 1 and self.gate is not None:  # the second chunk waits for the test's word
                assert self.gate.wait(10)
            yield chunk
        if self.fail is not None:
            raise self.fail

    def close(self) -> None:
        self.closed = True


class Core:
    def __init__(self, bodies: dict[str, Body | Exception]):
        self.bodies = bodies
        self.asked: list[tuple[str, str, dict[str, Any]]] = []

    def read_namespaced_pod_log(self, pod: str, namespace: str, **options: Any) -> Body:
        self.asked.append((pod, namespace, options))
        body = self.bodies[pod]
        if isinstance(body, Exception):
            raise body
        return body


class StandIn(Connection):
    """A connection whose CoreV1Api is the stand-in."""

    stand_in: Core

    @property
    def core(self) -> Any:
        return self.stand_in


def connection(bodies: dict[str, Body | Exception]) -> StandIn:
    conn = StandIn(api=None, namespace="team", server="https://stand-in")
    conn.stand_in = Core(bodies)
    return conn


def test_lines_come_in_the_order_they_arrive_each_with_its_pod() -> None:
    gate = threading.Event()
    # j-0 says its first line and waits; j-1's whole log comes in between.
    conn = connection({"j-0": Body([b"zero one\n", b"zero two\n"], gate=gate), "j-1": Body([b"one one\none two\n"])})
    seen = []
    for pod, line in logs.merged(conn, ["j-0", "j-1"], follow=True, tail=None):
        seen.append((pod, line))
        if len(seen) == 3:
            gate.set()
    assert seen.index(("j-0", "zero one")) < seen.index(("j-0", "zero two"))
    assert seen[-1] == ("j-0", "zero two") and sorted(seen[:3]) == [
        ("j-0", "zero one"),
        ("j-1", "one one"),
        ("j-1", "one two"),
    ]
    asked = conn.stand_in.asked
    assert {a[0] for a in asked} == {"j-0", "j-1"} and all(a[1] == "team" for a in asked)
    assert all(a[2]["container"] == "trainer" and a[2]["follow"] is True for a in asked)


def test_one_pods_failure_is_said_once_the_others_ended_naming_the_pod() -> None:
    import kubernetes

    gone = kubernetes.client.ApiException(status=404, reason="Not Found")
    gone.body = '{"kind": "Status", "message": "pods \\"j-1\\" not found", "details": {"name": "j-1"}}'
    conn = connection({"j-0": Body([b"a\n", b"b\n"]), "j-1": gone})
    seen = []
    with pytest.raises(logs.PodLogsFailed) as failed:
        for item in logs.merged(conn, ["j-0", "j-1"], follow=False, tail=5):
            seen.append(item)
    assert seen == [("j-0", "a"), ("j-0", "b")]  # the other Pod's lines, all of them
    assert [(pod, str(err)) for pod, err in failed.value.failures] == [("j-1", "not found: pod j-1 in namespace team")]
    assert isinstance(failed.value, ClusterError) and str(failed.value) == "not found: pod j-1 in namespace team"
    assert failed.value.status == 404


def test_a_stream_that_breaks_midway_keeps_its_whole_lines_and_says_why() -> None:
    conn = connection({"j-0": Body([b"a\n", b"b\n", b"half a li"], fail=ConnectionResetError("reset by peer"))})
    seen = []
    with pytest.raises(logs.PodLogsFailed, match="cannot reach the cluster at https://stand-in: reset by peer"):
        for _, line in logs.merged(conn, ["j-0"], follow=True, tail=None):
            seen.append(line)
    assert seen == ["a", "b"]


def test_leaving_early_lets_the_readers_go_and_closes_their_streams() -> None:
    bodies = {f"j-{i}": Body([b"x\n" * 5000]) for i in range(3)}  # more than the queue holds
    conn = connection(dict(bodies))
    stream = logs.merged(conn, list(bodies), follow=True, tail=None)
    assert next(stream)[1] == "x"
    assert isinstance(stream, Generator)  # close() is how a caller leaves early
    stream.close()
    for _ in range(100):
        if all(b.closed for b in bodies.values()) and not [
            t for t in threading.enumerate() if t.name.startswith("logs-")
        ]:
            break
        threading.Event().wait(0.1)
    assert all(b.closed for b in bodies.values())
    assert not [t for t in threading.enumerate() if t.name.startswith("logs-")]


def test_a_line_without_an_end_is_passed_on_in_bounded_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "MAX_LINE_BYTES", 10)
    conn = connection({"j-0": Body([b"0123456789" * 3 + b"abc", b"def\nend"])})
    assert [line for _, line in logs.merged(conn, ["j-0"], follow=False, tail=None)] == [
        "0123456789",
        "0123456789",
        "0123456789",
        "abcdef",
        "end",
    ]
