"""The store a node (Pod) of an in-place elastic job serves from its launcher: a torch
TCPStore on the contract's port (roster.py says what it holds). It lives as long as the
Pod's main process, whatever its workers do, so the group's rounds survive any one worker;
`boot` tells this store from the one a Pod created again under the same name will serve.

The operator's notices (ddpjob.notice, taken by progress_server.py) land here: each lost
node that is a member of this node's generation n is written as `lost/<n>/<i>`, and
`fail/<n>` too, which every worker of the node sees within its watcher's next poll. A
notice of a node in no generation here ends nothing and is not kept."""

from __future__ import annotations

import datetime
import errno
import socket
import threading
import time
import uuid

import torch.distributed as dist

from .roster import Generation, lost_key

BIND_SECONDS = 30.0  # a Pod created again on this machine may wait for its predecessor's port


def listen(host: str, port: int, deadline: float) -> socket.socket:
    """A listening socket on (host, port); "" is every address of the Pod (IPv6 and IPv4)."""
    while True:
        family = socket.AF_INET6 if not host and socket.has_ipv6 else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            sock.bind((host or ("::" if family == socket.AF_INET6 else "0.0.0.0"), port))
            sock.listen(1024)
            return sock
        except OSError as e:
            sock.close()
            if e.errno != errno.EADDRINUSE or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


class NodeStore:
    def __init__(self, host: str, port: int):
        self.socket = listen(host, port, time.monotonic() + BIND_SECONDS)
        self.server = dist.TCPStore(
            host or "localhost",
            port,
            None,
            True,
            timeout=datetime.timedelta(seconds=30),
            wait_for_workers=False,
            master_listen_fd=self.socket.fileno(),
        )
        self.boot = uuid.uuid4().hex[:16]
        self.server.set("boot", self.boot)
        self.lock = threading.Lock()  # notices come in on the HTTP server's threads

    def notice(self, lost: tuple[int, ...]) -> int | None:
        """Record a notice; the generation it ends, if any of `lost` was in it."""
        with self.lock:
            if not self.server.check(["pointer"]):
                return None
            gen = Generation.parse(self.server.get("pointer"))
            members = set(lost) & set(gen.nodes)
            for node in members:
                self.server.set(lost_key(gen.number, node), "1")
            if members:
                self.server.set(f"fail/{gen.number}", "1")
                return gen.number
            return None
