"""A Service reached through the API server's service proxy, served on a loopback port.

`ddpjob tensorboard --via proxy` (cli/tensorboard.py) uses it where `kubectl port-forward`
cannot work: the port-forward needs the node's kubelet to serve its streaming protocol,
which the development cluster's process kubelet does not (docs/divergences.md, K9). The
API server proxies `/api/v1/namespaces/NS/services/http:NAME:PORT/proxy/PATH` to
`http://<a ready endpoint's Pod IP>:PORT/PATH`; this server listens on the user's
machine and sends each request there with the user's credentials (the connection's
kubeconfig: its client certificate, or its token), so a browser, which holds no
credentials, can open it at `http://127.0.0.1:PORT/`.

It forwards to that one Service only: a path that leaves the proxy prefix once
normalised (`..`) is refused, so the port never gives the user's rights over the rest
of the API to other processes on the machine. The API server rewrites absolute links
in HTML pages to carry its proxy prefix; such a path is sent on as it is.

Each response goes back whole, unbuffered, with the connection closed after it
(HTTP/1.0), so no framing needs rewriting; the API server's errors (a Service with no
ready endpoint: 503) pass through as they are.
"""

from __future__ import annotations

import http.server
import sys
import threading
import urllib.parse
from typing import Any

from ddpjob.cli.kubeclient import Connection

# Hop-by-hop headers (RFC 9110 7.6.1) and what this server sets itself.
SKIP_REQUEST = {"host", "connection", "keep-alive", "proxy-authorization", "te", "trailer", "upgrade", "authorization"}
SKIP_RESPONSE = {"connection", "keep-alive", "transfer-encoding", "trailer", "upgrade"}
CHUNK = 64 * 1024
TIMEOUT_SECONDS = 60.0  # one request's answer from the API server
STOP_SECONDS = 5.0  # for the accept loop to end at stop(); answers still streaming end with the process


def proxy_prefix(namespace: str, service: str, port: int | str, scheme: str = "http") -> str:
    quote = urllib.parse.quote
    return f"/api/v1/namespaces/{quote(namespace)}/services/{scheme}:{quote(service)}:{port}/proxy"


def upstream_path(prefix: str, path: str) -> str | None:
    """The API server path for a local request path (with its query), or None when it
    has a `.` or `..` segment (which could leave the Service's proxy prefix)."""
    split = urllib.parse.urlsplit(path)
    local = split.path or "/"
    if not (local == prefix or local.startswith(prefix + "/")):
        local = prefix + local
    if any(segment in (".", "..") for segment in urllib.parse.unquote(local).split("/")):
        return None
    return local + (f"?{split.query}" if split.query else "")


class ServiceProxy:
    """`start()` it; `url` is where it answers; `stop()` ends it."""

    def __init__(self, conn: Connection, service: str, port: int, *, address: str = "127.0.0.1", local_port: int = 0):
        self.conn, self.prefix = conn, proxy_prefix(conn.namespace, service, port)
        self.httpd = _Server((address, local_port), _handler(self))
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="service-proxy", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        host = str(host)
        return f"http://{'[' + host + ']' if ':' in host else host}:{port}/"

    def start(self) -> ServiceProxy:
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stop listening, in bounded time (Ctrl-C must end the command): the accept loop
        gets STOP_SECONDS to notice; an answer still streaming (a browser's open request, an
        API server that stalls) is not waited for: its daemon thread ends with the process."""
        stopper = threading.Thread(target=self.httpd.shutdown, name="service-proxy-stop", daemon=True)
        stopper.start()
        stopper.join(STOP_SECONDS)
        self.httpd.server_close()

    def request(self, method: str, path: str, headers: dict[str, str], body: bytes | None = None) -> Any:
        """Send one request through the API server (`path`: already an upstream path);
        the urllib3 response, its body not read yet."""
        client = self.conn.api
        sent = dict(headers)
        for auth in client.configuration.auth_settings().values():
            if auth.get("in") == "header" and auth.get("value"):
                sent[auth["key"]] = auth["value"]
        return client.rest_client.pool_manager.request(
            method,
            self.conn.server.rstrip("/") + path,
            headers=sent,
            body=body,
            preload_content=False,
            decode_content=False,
            redirect=False,
            retries=False,
            timeout=TIMEOUT_SECONDS,
        )


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default joins every request's thread at server_close(), however long
    # its answer takes: stop() would then wait on a stalled upstream.
    block_on_close = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        # One line, not socketserver's traceback per failed request (a browser that went
        # away, an API server that broke off an answer): the user's terminal stays readable.
        exc = sys.exc_info()[1]
        print(
            f"ddpjob: a request through the API server failed: {' '.join(str(exc).split())[:200]}",
            file=sys.stderr,
            flush=True,
        )


def _handler(proxy: ServiceProxy) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # a browser's every request: not the user's concern
            pass

        def _forward(self) -> None:
            path = upstream_path(proxy.prefix, self.path)
            if path is None:
                self.send_error(400, "outside the Service's proxy path")
                return
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in SKIP_REQUEST}
            try:
                upstream = proxy.request(self.command, path, headers, body)
            except Exception as exc:  # noqa: BLE001 - any failure to reach the API server is the browser's 502
                self.send_error(502, f"the API server did not answer: {' '.join(str(exc).split())[:200]}")
                return
            try:
                self.send_response(upstream.status, upstream.reason)
                for key, value in upstream.headers.items():
                    if key.lower() not in SKIP_RESPONSE:
                        self.send_header(key, value)
                self.end_headers()
                if self.command != "HEAD":
                    for chunk in upstream.stream(CHUNK, decode_content=False):
                        self.wfile.write(chunk)
            finally:
                upstream.release_conn()

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _forward  # do_<METHOD>

    return Handler
