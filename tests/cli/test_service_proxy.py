"""`ddpjob tensorboard --via proxy`'s loopback server (cli/service_proxy.py) against a
stand-in API server: each local path goes to the one Service's proxy path with the
user's credentials, and no path leaves it."""

from __future__ import annotations

import http.server
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import kubernetes
import pytest

from ddpjob.cli.service_proxy import ServiceProxy, proxy_prefix, upstream_path
from ddpjob.cluster.connection import Connection

pytestmark = pytest.mark.timeout(60)
PREFIX = "/api/v1/namespaces/team-a/services/http:board-tensorboard:6006/proxy"


def test_local_paths_map_under_the_services_proxy_prefix() -> None:
    assert proxy_prefix("team-a", "board-tensorboard", 6006) == PREFIX
    assert upstream_path(PREFIX, "/") == PREFIX + "/"
    assert upstream_path(PREFIX, "/data/runs?a=1&b=2") == PREFIX + "/data/runs?a=1&b=2"
    # An absolute link the API server rewrote in an HTML page already carries the prefix.
    assert upstream_path(PREFIX, PREFIX + "/index.js") == PREFIX + "/index.js"
    for escape in ("/../../pods/x", PREFIX + "/../../secrets", "/%2e%2e/%2E%2E/pods", "/./x"):
        assert upstream_path(PREFIX, escape) is None, escape


@pytest.fixture
def api_server() -> Iterator[tuple[str, list[tuple[str, str, str | None]]]]:
    """What an API server's service proxy answers, and each request it got."""
    seen: list[tuple[str, str, str | None]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            seen.append((self.command, self.path, self.headers.get("Authorization")))
            ready = self.path.startswith(PREFIX + "/data")
            body = b'{"runs": ["."]}' if ready else b'no endpoints available for service "board-tensorboard"'
            self.send_response(200 if ready else 503)
            self.send_header("Content-Type", "application/json" if ready else "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


def test_requests_go_through_the_api_server_with_the_users_credentials(api_server) -> None:
    url, seen = api_server
    config = kubernetes.client.Configuration(
        host=url, api_key={"authorization": "s3cret"}, api_key_prefix={"authorization": "Bearer"}
    )
    conn = Connection(kubernetes.client.ApiClient(config), "team-a", url)
    proxy = ServiceProxy(conn, "board-tensorboard", 6006).start()
    try:
        assert proxy.url.startswith("http://127.0.0.1:")
        request = urllib.request.Request(proxy.url + "data/runs?x=1", headers={"Authorization": "Bearer theirs"})
        with urllib.request.urlopen(request, timeout=10) as got:
            assert (got.status, got.read()) == (200, b'{"runs": ["."]}')
        assert seen == [("GET", PREFIX + "/data/runs?x=1", "Bearer s3cret")]  # the kubeconfig's, never the caller's
        # The API server's refusal passes through as it is.
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(proxy.url, timeout=10)
        assert refused.value.code == 503 and b"no endpoints available" in refused.value.read()
        # A path that would leave the Service's proxy never reaches the API server.
        before = len(seen)
        with pytest.raises(urllib.error.HTTPError) as outside:
            urllib.request.urlopen(proxy.url + "%2e%2e/%2e%2e/%2e%2e/pods", timeout=10)
        assert outside.value.code == 400 and len(seen) == before
    finally:
        proxy.stop()
        conn.api.close()


def test_stop_does_not_wait_for_an_answer_that_stalls() -> None:
    # Ctrl-C must end `ddpjob tensorboard` while a request is still being answered: here the
    # API server sends its headers, then nothing until the test ends.
    release, streaming = threading.Event(), threading.Event()

    class Stalling(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.write(b"x")
            self.wfile.flush()
            streaming.set()
            release.wait(50)
            self.wfile.write(b"x" * 99)  # the rest: the proxy's thread ends cleanly after the test

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stalling)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    conn = Connection(kubernetes.client.ApiClient(kubernetes.client.Configuration(host=url)), "team-a", url)
    proxy = ServiceProxy(conn, "board-tensorboard", 6006).start()
    got: list[bytes] = []
    reader = threading.Thread(
        target=lambda: got.append(urllib.request.urlopen(proxy.url, timeout=55).read()), daemon=True
    )
    try:
        reader.start()
        assert streaming.wait(20), "the stand-in API server never got the request"
        stopper = threading.Thread(target=proxy.stop, daemon=True)
        stopper.start()
        stopper.join(20)  # a deadline, not a speed claim: without the fix it returns only after `release`
        assert not stopper.is_alive(), "stop() waited for the stalled answer"
        with pytest.raises(OSError):  # no longer listening
            urllib.request.urlopen(proxy.url, timeout=5)
        release.set()
        reader.join(20)
        assert got == [b"x" * 100]  # what was being answered still arrives whole
    finally:
        release.set()
        server.shutdown()
        server.server_close()
        conn.api.close()
