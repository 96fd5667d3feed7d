"""One read of a Pod's `/progress`, as untrusted input: no redirect, one deadline, bounded work.

The code in the Pod wrote the answer: http.client follows no redirect (an answer cannot
make the operator fetch another address), a timer cuts the socket when the deadline for
the whole exchange has passed (a Pod that drips a byte every few seconds is cut off),
and a body over MAX_BODY is refused. The deadline alone bounds time, not work: a Pod
answering `HTTP/1.1 100 Continue` without end kept http.client parsing interim answers
for the whole 5 s (3.9 s of the operator's CPU per read). So the bytes read from the
socket, status lines and headers included, are capped at MAX_ANSWER, and more than
MAX_INTERIM interim (1xx) answers end the read: a hostile job's reads cost about what
a healthy job's do.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import socket
import threading
from typing import Any

from ddpjob.operator.interim_answers import InterimCounted

FETCH_TIMEOUT = 5.0  # for the whole response, headers and body
MAX_BODY = 256 * 1024
MAX_ANSWER = MAX_BODY + 64 * 1024  # everything the socket may give: status lines, headers, body
MAX_INTERIM = 2  # ddpjob-launch sends none; HTTP allows a few (100 Continue, 103 Early Hints)


class _Budget(io.RawIOBase):
    """The socket's bytes, MAX_ANSWER of them at most for the whole answer."""

    def __init__(self, raw: Any, limit: int):
        self.raw, self.left = raw, limit

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.left <= 0:
            raise ValueError(f"answer larger than {MAX_ANSWER} bytes (status lines and headers included)")
        n = self.raw.readinto(memoryview(buffer)[: min(len(buffer), self.left)]) or 0
        self.left -= n
        return n

    def close(self) -> None:
        self.raw.close()
        super().close()


class _BoundedSocket:
    """What http.client's response reads through: the connection's socket, its reads budgeted."""

    def __init__(self, sock: socket.socket):
        self.sock = sock

    def makefile(self, mode: str, *args: Any, **kwargs: Any) -> io.BufferedReader:
        # The socket's own unbuffered reader: it holds the socket open after the
        # connection closes its end (as http.client expects of makefile), until read.
        return io.BufferedReader(_Budget(self.sock.makefile("rb", buffering=0), MAX_ANSWER))

    def __getattr__(self, name: str) -> Any:  # sendall, close, settimeout...: the socket's own
        return getattr(self.sock, name)


class _Response(InterimCounted):
    """Counts the interim answers that `begin()` skips (interim_answers.py)."""

    max_interim = MAX_INTERIM


class _Connection(http.client.HTTPConnection):
    response_class = _Response

    def connect(self) -> None:
        super().connect()
        self.sock = _BoundedSocket(self.sock)


def fetch_json(url: str, timeout: float = FETCH_TIMEOUT) -> Any:
    """GET `url` (http://ip:port/progress): 200 and JSON, or an exception. http.client
    follows no redirect; a timer closes the socket when `timeout` has passed for the whole
    exchange, whatever the peer sends meanwhile."""
    hostport, _, path = url.removeprefix("http://").partition("/")
    host, _, port = hostport.rpartition(":")
    conn = _Connection(host.strip("[]"), int(port), timeout=timeout)
    expired = threading.Event()
    held: list[socket.socket] = []  # the connection drops its reference once the answer says "close"

    def cut() -> None:
        expired.set()
        for sock in held:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(timeout, cut)
    timer.daemon = True
    timer.start()
    try:
        conn.connect()
        held.append(conn.sock.sock)  # type: ignore[union-attr]
        conn.request("GET", "/" + path, headers={"Accept": "application/json"})
        response = conn.getresponse()
        if response.status != 200:
            raise ValueError(f"HTTP {response.status} (redirects are not followed)")
        body = response.read(MAX_BODY + 1)
        if len(body) > MAX_BODY:
            raise ValueError(f"answer larger than {MAX_BODY} bytes")
        if expired.is_set():
            raise TimeoutError(f"no whole answer within {timeout:g}s")
        return json.loads(body)
    except OSError as exc:
        if expired.is_set():
            raise TimeoutError(f"no whole answer within {timeout:g}s") from None
        raise exc
    finally:
        timer.cancel()
        conn.close()


def progress_url(ip: str, port: int) -> str:
    host = f"[{ip}]" if ":" in ip else ip  # an IPv6 Pod IP
    return f"http://{host}:{port}/progress"
