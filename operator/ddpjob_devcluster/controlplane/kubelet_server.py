"""The kubelet's read-only HTTPS endpoint that `kubectl logs` reaches through the API
server: `GET /containerLogs/{namespace}/{pod}/{container}` (pkg/kubelet/server/server.go),
which the API server proxies from `pods/{name}/log` to the node's InternalIP and
`status.daemonEndpoints.kubeletEndpoint.Port` (pkg/registry/core/pod/rest/log.go).

Only the API server may call it: TLS with a certificate from the cluster's CA, and a
client certificate from that CA required, as a kubelet's x509 authentication does.
Served: `tailLines` and `follow` (the stream ends when the container has exited and its
output is read). Not served: exec, attach, port-forward, metrics.
"""

from __future__ import annotations

import contextlib
import http.server
import pathlib
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable

from ddpjob_devcluster.kubelet.container_log import LogReader

FOLLOW_POLL = 0.1
# A container's log: (file, is the container still running?) or None if unknown here.
Find = Callable[[str, str, str], "tuple[pathlib.Path, Callable[[], bool]] | None"]


class KubeletServer:
    def __init__(self, find: Find, cert: pathlib.Path, key: pathlib.Path, ca: pathlib.Path):
        self.find = find
        self.stopping = threading.Event()
        handler = _handler(self)
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(cert), str(key))
        context.load_verify_locations(str(ca))
        context.verify_mode = ssl.CERT_REQUIRED
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="kubelet-server", daemon=True)

    def start(self) -> KubeletServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def _handler(server: KubeletServer) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # the API server logs requests already
            pass

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            url = urllib.parse.urlsplit(self.path)
            parts = url.path.strip("/").split("/")
            if len(parts) != 4 or parts[0] != "containerLogs":
                return self._plain(404, "not found\n")
            namespace, pod, container = parts[1:]
            found = server.find(namespace, pod, container)
            if found is None:
                return self._plain(404, f'container "{container}" in pod "{pod}" is not known to this node\n')
            params = dict(urllib.parse.parse_qsl(url.query))
            try:
                tail = int(params["tailLines"]) if params.get("tailLines") else None
            except ValueError:
                return self._plain(400, f"invalid tailLines: {params['tailLines']!r}\n")
            self._stream(pod, *found, tail=tail, follow=params.get("follow") in ("true", "1"))

        def _plain(self, code: int, text: str) -> None:
            body = text.encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _stream(
            self, pod: str, path: pathlib.Path, running: Callable[[], bool], *, tail: int | None, follow: bool
        ) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            reader = LogReader(pod, path, running, follow)
            with contextlib.suppress(OSError):
                self._chunk(reader.head(tail))
                while follow and not server.stopping.is_set():
                    fresh = reader.next()
                    if fresh is None:
                        break  # exited, and everything it wrote has been sent
                    if fresh:
                        self._chunk(fresh)
                    else:
                        time.sleep(FOLLOW_POLL)
                self.wfile.write(b"0\r\n\r\n")

        def _chunk(self, data: bytes) -> None:
            if data:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

    return Handler
