"""Notices to an elastic job's Pods: "these nodes are lost", from whoever sees the loss first
(the operator: a Pod deleted, failed, or on a NotReady node; `ddpjob run`: a process tree
that ended). The Pods' launchers take them (ddpjob_trainer.progress_server), so the
survivors re-form their group in place without waiting for a collective to fail or time out
(ddpjob_trainer.roster). Pure and stdlib-only: the operator, the local runner and the
trainer image share it.

The channel is bounded and authenticated as the progress channel is bounded:
- `POST /notice` to the Pod's progress port; the body is JSON `{"lost": [index, ...],
  "time": seconds}`, at most MAX_BODY bytes and MAX_LOST indices; no redirect is followed,
  one deadline covers the exchange, the answer is not read past its status line;
- `X-DDPJob-Signature` is HMAC-SHA256 of the body under the job's token. The token is
  HMAC-SHA256 of `namespace/name/uid` under the sender's key (`job_token`): the operator's
  `DDPJOB_NOTICE_KEY`, or one it draws at start (then Pods made by an earlier operator
  process refuse its notices and find the loss themselves), given to the job's Pods in
  `DDPJOB_NOTICE_TOKEN` (the contract), never rendered;
- the receiver refuses a body it has seen (replay) or whose time is more than MAX_AGE from
  its clock, and a notice can do no more than any peer's failure does: make the group
  re-form without the named nodes, which come back as joiners if they are in fact alive.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import threading
from collections import OrderedDict

PATH = "/notice"
HEADER = "X-DDPJob-Signature"
MAX_BODY = 1024
MAX_LOST = 64
MAX_INDEX = 1 << 20
MAX_AGE = 300.0  # seconds either way: clocks of a cluster's nodes agree far better
TIMEOUT = 2.0  # one POST, connection to status line


class NoticeError(ValueError):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def job_token(key: bytes, namespace: str, name: str, uid: str) -> str:
    return hmac.new(key, f"{namespace}/{name}/{uid}".encode(), hashlib.sha256).hexdigest()


def encode(lost: list[int] | tuple[int, ...], now: float) -> bytes:
    return json.dumps({"lost": sorted(set(lost))[:MAX_LOST], "time": round(now, 3)}).encode()


def sign(token: str, body: bytes) -> str:
    return hmac.new(token.encode(), body, hashlib.sha256).hexdigest()


class ReplayGuard:
    """The digests of the notices taken within MAX_AGE (a bounded, thread-safe memory)."""

    def __init__(self, limit: int = 4096):
        self.seen: OrderedDict[str, float] = OrderedDict()
        self.limit, self.lock = limit, threading.Lock()

    def first(self, digest: str, now: float) -> bool:
        with self.lock:
            while self.seen and (len(self.seen) >= self.limit or next(iter(self.seen.values())) < now - 2 * MAX_AGE):
                self.seen.popitem(last=False)
            if digest in self.seen:
                return False
            self.seen[digest] = now
            return True


def verify(token: str | None, body: bytes, signature: str | None, now: float, guard: ReplayGuard) -> tuple[int, ...]:
    """The lost node indices of an authentic, fresh notice; NoticeError (with an HTTP status) otherwise."""
    if not token:
        raise NoticeError(404, "this Pod takes no notices")
    if len(body) > MAX_BODY:
        raise NoticeError(413, f"body over {MAX_BODY} bytes")
    expected = sign(token, body)
    if not signature or not hmac.compare_digest(expected, signature.strip().lower()):
        raise NoticeError(401, "bad signature")
    try:
        notice = json.loads(body)
        lost, sent = notice["lost"], float(notice["time"])
    except (ValueError, KeyError, TypeError):
        raise NoticeError(400, 'not a notice: {"lost": [...], "time": seconds}') from None
    if (
        not isinstance(lost, list)
        or len(lost) > MAX_LOST
        or not all(type(i) is int and 0 <= i < MAX_INDEX for i in lost)
    ):
        raise NoticeError(400, f"lost: at most {MAX_LOST} node indices")
    if abs(now - sent) > MAX_AGE:
        raise NoticeError(400, f"time is {now - sent:+.0f}s off this Pod's clock")
    if not guard.first(expected, now):
        raise NoticeError(409, "seen before")
    return tuple(lost)


def post(
    host: str, port: int, token: str, lost: list[int] | tuple[int, ...], now: float, timeout: float = TIMEOUT
) -> int:
    """Send one notice; the HTTP status (204: taken). OSError when the Pod cannot be
    reached or has not answered within `timeout` (for the whole exchange: a Pod that drips
    its answer is cut off by a timer, as a progress read is)."""
    body = encode(lost, now)
    conn = http.client.HTTPConnection(host.strip("[]"), port, timeout=timeout)
    timer = threading.Timer(timeout, lambda: conn.sock and conn.sock.shutdown(2))
    timer.daemon = True
    timer.start()
    try:
        conn.request("POST", PATH, body=body, headers={HEADER: sign(token, body), "Content-Type": "application/json"})
        return conn.getresponse().status
    except http.client.HTTPException as e:
        raise OSError(f"no answer: {e}") from None
    finally:
        timer.cancel()
        conn.close()
