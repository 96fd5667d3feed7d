"""The progress channel as untrusted input: a hostile fake Pod (a local HTTP server) that
redirects, drips its answer, sends NaN, huge numbers, megabytes of ranks or control
characters gets no further than its own job."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
import time
from collections.abc import Iterator
from typing import ClassVar

import pytest

from ddpjob import text
from ddpjob.job.stall import ProgressState
from ddpjob.operator.progress import ProgressPoller, Target
from ddpjob.operator.progress_fetch import fetch_json
from tests.support.deadlines import REACTION

GOOD = {"record": {"step": 5, "total_steps": 10}, "seconds_since_progress": 1, "ranks": {"0": {"step": 5}}}
DRIP = 90  # bytes of a dripping answer, one every 0.2 s: 18 s, under its Content-Length of 100


class Hostile(http.server.BaseHTTPRequestHandler):
    behaviour = "good"
    hits: ClassVar[list[str]] = []  # every request to any instance
    sent = 0

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        Hostile.hits.append(self.path)
        if self.path == "/elsewhere":
            self._json(GOOD)
        elif self.behaviour == "redirect":
            self.send_response(302)
            self.send_header("Location", "/elsewhere")
            self.end_headers()
        elif self.behaviour == "drip":
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            Hostile.sent = 0
            try:
                for _ in range(DRIP):  # a byte a few tenths of a second: no single read times out
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    Hostile.sent += 1
                    time.sleep(0.2)
            except OSError:
                pass  # the reader hung up
        elif self.behaviour == "continue-flood":  # interim answers without end, then none
            self._flood(b"HTTP/1.1 100 Continue\r\n\r\n")
        elif self.behaviour == "header-flood":  # 100 headers of 60 KB: within http.client's own limits
            self.wfile.write(b"HTTP/1.1 200 OK\r\n")
            self._flood(b"X-Filler: " + b"x" * 60_000 + b"\r\n", times=100)
            self._flood(b"Content-Length: 2\r\n\r\n{}", times=1)
        elif self.behaviour == "huge":
            self._raw(b'{"ranks": {' + b",".join(b'"%d": {"step": 1}' % i for i in range(100_000)) + b"}}")
        else:
            self._json(GOOD)

    def _flood(self, chunk: bytes, times: int | None = None) -> None:
        """Write `chunk` until the reader hangs up (or `times` times), for at most 10 s."""
        Hostile.sent = 0
        deadline = time.monotonic() + 10
        try:
            while (times is None or Hostile.sent < times * len(chunk)) and time.monotonic() < deadline:
                self.wfile.write(chunk)
                Hostile.sent += len(chunk)
        except OSError:
            pass

    def _json(self, doc: object) -> None:
        self._raw(json.dumps(doc).encode())

    def _raw(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def pod() -> Iterator[tuple[str, int]]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Hostile.hits = []
    yield "127.0.0.1", server.server_address[1]
    server.shutdown()


def test_a_redirect_is_not_followed(pod) -> None:
    Hostile.behaviour = "redirect"
    with pytest.raises(ValueError, match="HTTP 302"):
        fetch_json(f"http://{pod[0]}:{pod[1]}/progress")
    assert Hostile.hits == ["/progress"]  # /elsewhere was never asked for


def test_a_dripping_answer_is_cut_at_the_whole_response_deadline(pod) -> None:
    Hostile.behaviour = "drip"
    with pytest.raises(TimeoutError, match="no whole answer within 1s"):
        fetch_json(f"http://{pod[0]}:{pod[1]}/progress", timeout=1.0)
    # The read ended while the answer was still coming (a deadline per read would have
    # taken every byte): the deadline is for the whole answer.
    assert Hostile.sent < DRIP


def test_endless_interim_answers_end_the_read_at_the_third(pod) -> None:
    """Before, http.client skipped `100 Continue` answers until the deadline: seconds of the
    operator's CPU for every read of a hostile Pod."""
    Hostile.behaviour = "continue-flood"
    with pytest.raises(ValueError, match=r"more than 2 interim \(1xx\) answers"):
        fetch_json(f"http://{pod[0]}:{pod[1]}/progress")


def test_headers_past_the_answers_byte_budget_are_refused(pod) -> None:
    Hostile.behaviour = "header-flood"
    with pytest.raises(ValueError, match=r"answer larger than 327680 bytes"):
        fetch_json(f"http://{pod[0]}:{pod[1]}/progress")


def test_an_oversized_answer_is_refused(pod) -> None:
    Hostile.behaviour = "huge"
    with pytest.raises(ValueError, match="larger than"):
        fetch_json(f"http://{pod[0]}:{pod[1]}/progress")


@pytest.mark.parametrize(
    "snap,error",
    [
        ({"seconds_since_progress": float("nan")}, "seconds_since_progress"),
        ({"seconds_since_progress": float("inf")}, "seconds_since_progress"),
        ({"seconds_since_progress": "12"}, "seconds_since_progress"),
        ({"seconds_since_progress": 10**4000}, "seconds_since_progress"),
        ({"seconds_since_progress": 1, "ranks": ["x"]}, "ranks"),
        ([], "JSON object"),
    ],
)
def test_numbers_and_shapes_out_of_bounds_are_a_bad_answer(snap, error) -> None:
    with pytest.raises(ValueError, match=error):
        ProgressState.from_snapshot(snap, 0)


def test_records_ranks_and_etas_are_bounded() -> None:
    huge = {
        "seconds_since_progress": 3,
        "eta_seconds": float("nan"),
        "record": {"step": 10**4000},
        "ranks": {str(i): {"step": 1, "junk": "x" * 1000} for i in range(5000)},
    }
    state = ProgressState.from_snapshot(huge, 0, world_size=8)
    assert state.record is None and state.eta_seconds is None  # a 4,000-digit step is no record
    assert sorted(state.ranks) == list(range(8)) and state.ranks[3] == {"step": 1}  # only this job's ranks, bounded
    assert ProgressState.from_snapshot({"ranks": {"99": {"step": 2}, "x": 1}}, 0, world_size=4).ranks == {}


def test_control_characters_are_escaped_and_messages_bounded() -> None:
    assert text.clean("ok\x1b[2J\x07done\nline2\tx\x9b") == "ok\\x1b[2J\\x07done\nline2\tx\\x9b"
    long = text.clean("y" * 10_000)
    assert len(long) == text.MESSAGE_LIMIT and long.endswith("…")


def test_a_slow_job_delays_only_itself(pod) -> None:
    """Six dripping Pods (the old reader pool's size) and one healthy job: the healthy job's
    progress still arrives, read by the poller's own threads."""
    Hostile.behaviour = "drip"
    healthy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), type("Good", (Hostile,), {"behaviour": "good"}))
    healthy.daemon_threads = True
    threading.Thread(target=healthy.serve_forever, daemon=True).start()
    triggered: list = []
    port_of = {"127.0.0.1": pod[1]}

    def fetch(url: str):
        return fetch_json(url, timeout=1.0)

    async def go():
        poller = ProgressPoller(triggered.append, interval=0.05, jitter=0.0, fetch=fetch)
        for i in range(6):
            poller.watch(("ns", f"slow{i}"), Target(0, ("127.0.0.1",), 10, port=port_of["127.0.0.1"]))
        poller.watch(("ns", "healthy"), Target(0, ("127.0.0.1",), 10, port=healthy.server_address[1]))
        deadline = time.monotonic() + REACTION
        while ("ns", "healthy") not in triggered and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await poller.close()

    try:
        asyncio.run(go())
    finally:
        healthy.shutdown()
    assert ("ns", "healthy") in triggered
    assert not any(key[1].startswith("slow") for key in triggered)
