"""`ddpjob tensorboard --via proxy` (cli/service_proxy.py) as a local attacker meets it:
raw requests on its port, against a stand-in API server that frames requests as
kube-apiserver's Go net/http does (chunked wins over Content-Length, connections kept
alive) and records every request it parses. Whatever a client sends, the API server gets
the one request it was given, on a connection of its own, or nothing."""

from __future__ import annotations

import json
import socket
import socketserver
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import kubernetes
import pytest

from ddpjob.cli import service_proxy
from ddpjob.cluster.connection import Connection

pytestmark = pytest.mark.timeout(60)
PREFIX = "/api/v1/namespaces/team-a/services/http:board-tensorboard:6006/proxy"
# The request the fourth security review sent: both framings, and a body that is a
# chunked body's end followed by the start of another request.
SMUGGLED = b"0\r\n\r\nGET /api/v1/namespaces/team-a/secrets HTTP/1.1\r\nX-Absorb: "


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    connection: int


@dataclass
class GoLikeApiServer:
    """What kube-apiserver's HTTP/1.1 server makes of the bytes it gets."""

    url: str = ""
    seen: list[Seen] = field(default_factory=list)


def _read_request(rfile) -> tuple[str, str, dict[str, str], bytes] | None:
    line = rfile.readline(65536)
    if not line.strip():
        return None
    method, path, _ = line.decode("latin-1").split(" ", 2)
    headers: dict[str, str] = {}
    while (header := rfile.readline(65536)) not in (b"\r\n", b"\n", b""):
        key, _, value = header.decode("latin-1").partition(":")
        headers[key.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():  # wins over Content-Length (RFC 9112 6.3)
        body = b""
        while (size := int(rfile.readline(100).split(b";")[0], 16)) > 0:
            body += rfile.read(size)
            rfile.readline(10)
        while rfile.readline(65536) not in (b"\r\n", b"\n", b""):  # trailers
            pass
    else:
        body = rfile.read(int(headers.get("content-length") or 0))
    return method, path, headers, body


@pytest.fixture
def api_server() -> Iterator[GoLikeApiServer]:
    server_state = GoLikeApiServer()
    connections = iter(range(1, 1_000_000))

    class Handler(socketserver.StreamRequestHandler):
        timeout = 20

        def handle(self) -> None:
            number = next(connections)
            while True:  # keep-alive: request after request on one connection
                try:
                    request = _read_request(self.rfile)
                except (OSError, ValueError):
                    return
                if request is None:
                    return
                method, path, headers, body = request
                server_state.seen.append(Seen(method, path, headers, body, number))
                answer = json.dumps({"answering": f"{method} {path}"}).encode()
                self.wfile.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(answer)}\r\n\r\n".encode()
                    + answer
                )
                self.wfile.flush()
                if headers.get("connection", "").lower() == "close":
                    return

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    server_state.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield server_state
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy(api_server: GoLikeApiServer) -> Iterator[service_proxy.ServiceProxy]:
    config = kubernetes.client.Configuration(
        host=api_server.url, api_key={"authorization": "s3cret"}, api_key_prefix={"authorization": "Bearer"}
    )
    conn = Connection(kubernetes.client.ApiClient(config), "team-a", api_server.url)
    started = service_proxy.ServiceProxy(conn, "board-tensorboard", 6006).start()
    yield started
    started.stop()
    conn.api.close()


def send(proxy: service_proxy.ServiceProxy, raw: bytes) -> tuple[int, bytes]:
    """One raw request on a connection of its own: the status and body of the answer."""
    host, port = proxy.httpd.server_address[:2]
    with socket.create_connection((str(host), port), timeout=20) as s:
        s.sendall(raw)
        s.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def host_of(proxy: service_proxy.ServiceProxy) -> str:
    return f"127.0.0.1:{proxy.httpd.server_address[1]}"


def get(proxy: service_proxy.ServiceProxy, path: str = "/data/runs") -> tuple[int, bytes]:
    return send(proxy, f"GET {path} HTTP/1.1\r\nHost: {host_of(proxy)}\r\n\r\n".encode())


def test_a_smuggled_request_never_reaches_the_api_server(proxy, api_server) -> None:
    smuggling = (
        f"POST /data/plugin/timeseries/timeSeries HTTP/1.1\r\nHost: {host_of(proxy)}\r\n"
        f"Content-Length: {len(SMUGGLED)}\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode() + SMUGGLED
    refused = send(proxy, smuggling)
    # The next requests get their own answers, not the smuggled request's.
    answers = [get(proxy) for _ in range(3)]
    assert [(s.method, s.path) for s in api_server.seen if s.method == "GET"] == [("GET", PREFIX + "/data/runs")] * 3
    assert answers == [(200, json.dumps({"answering": f"GET {PREFIX}/data/runs"}).encode())] * 3
    # And the request itself is refused: its body is framed two ways.
    assert refused[0] == 411 and b"Transfer-Encoding" in refused[1], refused
    assert len(api_server.seen) == 3


def test_each_request_has_an_upstream_connection_of_its_own(proxy, api_server) -> None:
    form = b"requests=%5B%7B%22plugin%22%3A%22scalars%22%2C%22tag%22%3A%22train%2Floss%22%7D%5D"
    status, body = send(
        proxy,
        (
            f"POST /data/plugin/timeseries/timeSeries HTTP/1.1\r\nHost: {host_of(proxy)}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\nX-XSRF-Protected: 1\r\n"
            f"Content-Length: {len(form)}\r\nConnection: keep-alive\r\n\r\n"
        ).encode()
        + form,
    )
    assert status == 200, body
    assert get(proxy)[0] == get(proxy)[0] == 200
    posted = api_server.seen[0]
    assert (posted.method, posted.path, posted.body) == ("POST", PREFIX + "/data/plugin/timeseries/timeSeries", form)
    assert posted.headers["content-length"] == str(len(form)) and "transfer-encoding" not in posted.headers
    assert posted.headers["x-xsrf-protected"] == "1" and posted.headers["authorization"] == "Bearer s3cret"
    # Three requests, three connections, each closed after its one request.
    assert len({s.connection for s in api_server.seen}) == len(api_server.seen) == 3
    assert all(s.headers.get("connection") == "close" for s in api_server.seen)


def test_a_second_request_in_the_clients_connection_is_not_read(proxy, api_server) -> None:
    pipelined = (
        f"GET /data/runs HTTP/1.1\r\nHost: {host_of(proxy)}\r\n\r\n"
        f"GET /data/other HTTP/1.1\r\nHost: {host_of(proxy)}\r\n\r\n"
    ).encode()
    assert send(proxy, pipelined)[0] == 200
    assert [s.path for s in api_server.seen] == [PREFIX + "/data/runs"]


@pytest.mark.parametrize(
    "host",
    [
        "evil.example:{port}",
        "rebind.attacker.test:{port}",
        "127.0.0.1:1",
        "localhost.:{port}",
        "127.0.0.1:{port}@evil.example",
        "[::1]:{port}",
        "",
    ],
)
def test_a_host_other_than_this_servers_is_refused(proxy, api_server, host: str) -> None:
    header = f"Host: {host.format(port=proxy.httpd.server_address[1])}\r\n" if host else ""
    status, body = send(proxy, f"GET /data/runs HTTP/1.1\r\n{header}\r\n".encode())
    assert status == 403 and b"Host must be this server's address" in body
    assert api_server.seen == []


def test_two_host_headers_are_refused(proxy, api_server) -> None:
    raw = f"GET / HTTP/1.1\r\nHost: {host_of(proxy)}\r\nHost: evil.example\r\n\r\n".encode()
    assert send(proxy, raw)[0] == 403 and api_server.seen == []


def test_its_own_names_are_accepted(proxy, api_server) -> None:
    port = proxy.httpd.server_address[1]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"):
        assert send(proxy, f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())[0] == 200
    assert len(api_server.seen) == 3


@pytest.mark.parametrize("method", ["DELETE", "PUT", "PATCH", "OPTIONS", "TRACE", "CONNECT", "PROPFIND"])
def test_only_tensorboards_methods_are_sent_on(proxy, api_server, method: str) -> None:
    raw = f"{method} /data/runs HTTP/1.1\r\nHost: {host_of(proxy)}\r\nContent-Length: 0\r\n\r\n".encode()
    assert send(proxy, raw)[0] in (405, 501)
    assert api_server.seen == []


@pytest.mark.parametrize(
    "headers",
    [
        "Content-Length: {too_big}\r\n",  # more than a time-series query ever is
        "Content-Length: 5\r\nContent-Length: 7\r\n",
        "Content-Length: -1\r\n",
        "Content-Length: 0x10\r\n",
        "Transfer-Encoding: chunked\r\n",
        "Transfer-Encoding: identity\r\nContent-Length: 5\r\n",
    ],
)
def test_bodies_framed_otherwise_than_by_one_bounded_length_are_refused(proxy, api_server, headers: str) -> None:
    framing = headers.format(too_big=service_proxy.MAX_BODY + 1)
    raw = f"POST /data/x HTTP/1.1\r\nHost: {host_of(proxy)}\r\n{framing}\r\n0\r\n\r\n".encode()
    assert send(proxy, raw)[0] in (400, 411, 413)
    assert api_server.seen == []


def test_a_get_with_a_body_is_refused(proxy, api_server) -> None:
    raw = f"GET /data/runs HTTP/1.1\r\nHost: {host_of(proxy)}\r\nContent-Length: 5\r\n\r\nhello".encode()
    assert send(proxy, raw)[0] == 413 and api_server.seen == []


def test_only_tensorboards_headers_are_sent_on(proxy, api_server) -> None:
    raw = (
        f"GET /data/runs HTTP/1.1\r\nHost: {host_of(proxy)}\r\nAccept: application/json\r\n"
        "Authorization: Bearer theirs\r\nCookie: a=b\r\nX-Forwarded-For: 10.0.0.1\r\nUpgrade: h2c\r\n"
        "Impersonate-User: system:admin\r\nX-Remote-User: admin\r\n\r\n"
    ).encode()
    assert send(proxy, raw)[0] == 200
    (seen,) = api_server.seen
    assert seen.headers["accept"] == "application/json" and seen.headers["authorization"] == "Bearer s3cret"
    for dropped in ("cookie", "x-forwarded-for", "upgrade", "impersonate-user", "x-remote-user"):
        assert dropped not in seen.headers


def test_hosts_by_listening_address() -> None:
    allowed = service_proxy.host_allowed
    assert allowed("127.0.0.1:6006", "127.0.0.1", 6006) and allowed("localhost:6006", "127.0.0.1", 6006)
    assert allowed("[::1]:6006", "::1", 6006) and allowed("localhost:6006", "::1", 6006)
    assert not allowed("127.0.0.1:6006", "::1", 6006)
    assert allowed("127.0.0.1", "127.0.0.1", 80) and not allowed("127.0.0.1", "127.0.0.1", 6006)
    # Listening on every address: any address literal, never a name.
    assert allowed("192.0.2.7:6006", "0.0.0.0", 6006) and allowed("[2001:db8::1]:6006", "::", 6006)
    assert not allowed("board.example:6006", "0.0.0.0", 6006)
    assert not allowed("192.0.2.7:6006", "127.0.0.1", 6006)
    for hostile in ("127.0.0.1:6006 ", "127.0.0.1:6006/x", "u@127.0.0.1:6006", "127.0.0.1:99999", "[::1", ""):
        assert not allowed(hostile, "127.0.0.1", 6006), hostile
