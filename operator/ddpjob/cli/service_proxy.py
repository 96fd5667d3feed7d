"""A Service reached through the API server's service proxy, served on a loopback port.

`ddpjob tensorboard --via proxy` (cli/tensorboard.py) uses it where `kubectl port-forward`
cannot work: the port-forward needs the node's kubelet to serve its streaming protocol,
which the development cluster's process kubelet does not (docs/divergences.md, K9). The
API server proxies `/api/v1/namespaces/NS/services/http:NAME:PORT/proxy/PATH` to
`http://<a ready endpoint's Pod IP>:PORT/PATH`; this server listens on the user's
machine and sends each request there with the user's credentials (the connection's
kubeconfig: its client certificate, or its token), so a browser, which holds no
credentials, can open it at `http://127.0.0.1:PORT/`.

Whatever reaches the port is hostile (any local process, or a web page through DNS
rebinding), and the user's credentials are added to what it sends on, so each request
is rebuilt, never relayed (docs/threat-model.md, "The CLI's TensorBoard proxy"):

- the path goes under the one Service's proxy prefix; one that leaves it once normalised
  (`..`) is refused, and what is not a URL character is percent-encoded;
- only TensorBoard's methods (GET, HEAD, POST: its time-series and hparams plugins POST
  their queries), and only with a `Host` naming this server (a page of another site that
  rebinds its name to 127.0.0.1 sends its own name);
- the body is read by `Content-Length` alone, at most MAX_BODY bytes, and sent with a
  length of the proxy's own; `Transfer-Encoding` is refused: the API server (Go's
  net/http) lets chunked framing win over a length, so a client's framing headers sent on
  with a body read another way made the rest of the body a second request (smuggled, with
  the user's rights: a SecretList answered to the next request);
- of the client's headers, only those TensorBoard's pages need (FORWARD, a list of names,
  each value one line of printable ASCII), never its credentials or framing;
- each request has an upstream connection of its own, closed after its answer, and the
  client's connection is closed after the answer too (HTTP/1.0): nothing a request leaves
  behind can reach the next one.

Why not `kubectl proxy --accept-paths ... --reject-methods ...`: the proxy is the fallback
where no kubectl is installed (`--via auto`), kubectl proxy serves the API's own paths
(the page would be at `/api/v1/.../proxy/`, and `/` is refused), and its path filter is a
regular expression over the raw path, where this one normalises and refuses.

The API server rewrites absolute links in HTML pages to carry its proxy prefix; such a
path is sent on as it is. Each response goes back whole, unbuffered; the API server's
errors (a Service with no ready endpoint: 503) pass through as they are.
"""

from __future__ import annotations

import contextlib
import http.server
import ipaddress
import socket
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from typing import Any

from ddpjob.cluster.connection import Connection

METHODS = ("GET", "HEAD", "POST")
MAX_BODY = 4 * 1024 * 1024  # a time-series query names each run and tag: tens of KiB for a large experiment
# The client's headers sent on: content negotiation, caching, and TensorBoard's own.
FORWARD = frozenset(
    {
        "accept",
        "accept-encoding",
        "accept-language",
        "cache-control",
        "content-type",
        "if-match",
        "if-modified-since",
        "if-none-match",
        "if-unmodified-since",
        "pragma",
        "user-agent",
        "x-requested-with",
        "x-tensorboard-feature-flags",
        "x-xsrf-protected",
    }
)
SKIP_RESPONSE = {"connection", "keep-alive", "transfer-encoding", "trailer", "upgrade"}
CHUNK = 64 * 1024
TIMEOUT_SECONDS = 60.0  # one request's answer from the API server
CLIENT_SECONDS = 30.0  # a client's request line, headers and body, each read
STOP_SECONDS = 5.0  # for the accept loop to end at stop(); answers still streaming end with the process


def proxy_prefix(namespace: str, service: str, port: int | str, scheme: str = "http") -> str:
    quote = urllib.parse.quote
    return f"/api/v1/namespaces/{quote(namespace)}/services/{scheme}:{quote(service)}:{port}/proxy"


def upstream_path(prefix: str, path: str) -> str | None:
    """The API server path for a local request path (with its query), or None when it
    has a `.` or `..` segment (which could leave the Service's proxy prefix)."""
    split = urllib.parse.urlsplit(path)
    local = urllib.parse.quote(split.path or "/", safe="/%:@!$&'()*+,;=-._~")
    if not (local == prefix or local.startswith(prefix + "/")):
        local = prefix + local
    if any(segment in (".", "..") for segment in urllib.parse.unquote(local).split("/")):
        return None
    query = urllib.parse.quote(split.query, safe="/%:@!$&'()*+,;=-._~?")
    return local + (f"?{query}" if query else "")


def host_allowed(host: str, address: str, port: int) -> bool:
    """Whether a request's `Host` names this server, listening at address:port: its
    address, `localhost` where that is a loopback one, or, listening on every address,
    any address literal (a name could be any site's, rebound to this machine)."""
    try:
        split = urllib.parse.urlsplit("//" + host)
        name, given = split.hostname, split.port or 80
    except ValueError:
        return False
    if not name or given != port or split.netloc != host or split.username is not None:
        return False
    listening = ipaddress.ip_address(address.split("%")[0])
    if name == "localhost":
        return listening.is_loopback or listening.is_unspecified
    try:
        literal = ipaddress.ip_address(name)
    except ValueError:
        return False
    return literal == listening or listening.is_unspecified


class ServiceProxy:
    """`start()` it; `url` is where it answers; `stop()` ends it."""

    def __init__(self, conn: Connection, service: str, port: int, *, address: str = "127.0.0.1", local_port: int = 0):
        self.conn, self.prefix = conn, proxy_prefix(conn.namespace, service, port)
        self.httpd = _Server((address, local_port), _handler(self))
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="service-proxy", daemon=True)

    @property
    def listening(self) -> tuple[str, int]:
        """The address and port it listens on."""
        address = self.httpd.server_address
        assert isinstance(address, tuple)
        return str(address[0]), int(address[1])

    @property
    def url(self) -> str:
        host, port = self.listening
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

    @contextlib.contextmanager
    def request(self, method: str, path: str, headers: dict[str, str], body: bytes | None = None) -> Iterator[Any]:
        """Send one request through the API server (`path`: already an upstream path), on
        a connection of its own that is closed on leaving; yields the urllib3 response, its
        body not read yet."""
        import kubernetes

        configuration = self.conn.api.configuration
        sent = {**headers, "Connection": "close"}
        for auth in configuration.auth_settings().values():
            if auth.get("in") == "header" and auth.get("value"):
                sent[auth["key"]] = auth["value"]
        # The client's own TLS and proxy settings, in a pool of its own: never a
        # connection another request used or will use.
        rest = kubernetes.client.rest.RESTClientObject(configuration)
        try:
            response = rest.pool_manager.request(
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
            try:
                yield response
            finally:
                response.close()
        finally:
            rest.close()


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default joins every request's thread at server_close(), however long
    # its answer takes: stop() would then wait on a stalled upstream.
    block_on_close = False

    def __init__(self, address: tuple[str, int], handler: type[http.server.BaseHTTPRequestHandler]):
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET  # `--address ::1`
        super().__init__(address, handler)

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
        timeout = CLIENT_SECONDS  # a client that sends half a request does not hold its thread for ever

        def log_message(self, *args: object) -> None:  # a browser's every request: not the user's concern
            pass

        def _refuse(self, code: int, why: str, *extra: tuple[str, str]) -> None:
            body = f"ddpjob tensorboard: {why}\n".encode()
            self.send_response(code)
            plain = (("Content-Type", "text/plain; charset=utf-8"), ("X-Content-Type-Options", "nosniff"))
            for key, value in (*plain, *extra):
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _refusal(self) -> tuple[int, str] | None:
            """Why this request is not sent on, or None."""
            hosts = self.headers.get_all("Host") or []
            if len(hosts) != 1 or not host_allowed(hosts[0], *proxy.listening):
                named = " ".join(hosts[0].split())[:100] if hosts else "none"
                return 403, f"Host must be this server's address ({proxy.url}), not {named}"
            if self.headers.get_all("Transfer-Encoding"):
                return 411, "a request body must come with Content-Length (Transfer-Encoding is not accepted)"
            lengths = self.headers.get_all("Content-Length") or ["0"]
            if len(lengths) != 1 or not (lengths[0].isascii() and lengths[0].isdigit() and len(lengths[0]) <= 12):
                return 400, "Content-Length must be one number"
            if int(lengths[0]) > (MAX_BODY if self.command == "POST" else 0):
                return 413, f"a {self.command} body may be at most {MAX_BODY if self.command == 'POST' else 0} bytes"
            return None

        def _forward(self) -> None:
            self.close_connection = True  # one request per connection: nothing left in it is read
            refused = self._refusal()
            path = upstream_path(proxy.prefix, self.path)
            if refused is None and path is None:
                refused = 400, "the path leaves the Service's proxy path"
            if refused is not None:
                self._refuse(*refused)
                return
            assert path is not None
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            if length and (body is None or len(body) != length):
                return  # the client went away before its body: nothing is sent
            headers = {}
            for key, value in self.headers.items():
                value = " ".join(value.split())
                if key.lower() in FORWARD and value.isascii() and value.isprintable():
                    headers[key] = value
            with contextlib.ExitStack() as opened:
                try:
                    upstream = opened.enter_context(proxy.request(self.command, path, headers, body))
                except Exception as exc:  # noqa: BLE001 - any failure to reach the API server is the browser's 502
                    self._refuse(502, f"the API server did not answer: {' '.join(str(exc).split())[:200]}")
                    return
                self.send_response(upstream.status, upstream.reason)
                for key, value in upstream.headers.items():
                    if key.lower() not in SKIP_RESPONSE:
                        self.send_header(key, value)
                self.send_header("Connection", "close")
                self.end_headers()
                if self.command != "HEAD":
                    for chunk in upstream.stream(CHUNK, decode_content=False):
                        self.wfile.write(chunk)

        def _not_allowed(self) -> None:
            self.close_connection = True
            self._refuse(405, f"only {', '.join(METHODS)} are sent on", ("Allow", ", ".join(METHODS)))

        do_GET = do_HEAD = do_POST = _forward  # http.server's do_<METHOD>
        do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_CONNECT = do_TRACE = _not_allowed

    return Handler
