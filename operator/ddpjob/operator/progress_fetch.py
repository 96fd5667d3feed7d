"""One read of a Pod's `/progress`, as untrusted input: no redirect, one deadline, a capped body.

The code in the Pod wrote the answer: http.client follows no redirect (an answer cannot
make the operator fetch another address), a timer cuts the socket when the deadline for
the whole exchange has passed (a Pod that drips a byte every few seconds is cut off),
and a body over MAX_BODY is refused.
"""
from __future__ import annotations

import http.client
import json
import socket
import threading
from typing import Any

FETCH_TIMEOUT = 5.0  # for the whole response, headers and body
MAX_BODY = 256 * 1024


def fetch_json(url: str, timeout: float = FETCH_TIMEOUT) -> Any:
    """GET `url` (http://ip:port/progress): 200 and JSON, or an exception. http.client
    follows no redirect; a timer closes the socket when `timeout` has passed for the whole
    exchange, whatever the peer sends meanwhile."""
    hostport, _, path = url.removeprefix("http://").partition("/")
    host, _, port = hostport.rpartition(":")
    conn = http.client.HTTPConnection(host.strip("[]"), int(port), timeout=timeout)
    expired = threading.Event()
    held: list[socket.socket] = []  # the connection drops its reference once the answer says "close"

    def cut() -> None:
        expired.set()
        for sock in held:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
    timer = threading.Timer(timeout, cut)
    timer.daemon = True
    timer.start()
    try:
        conn.connect()
        held.append(conn.sock)
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
