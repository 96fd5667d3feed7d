"""Clients of an in-place elastic job's node stores (node_store.py serves one per node),
reached at DDPJOB_NODE_ADDRESS with the node's index; roster.py says what they hold. A
node that does not answer is simply absent: its Pod is gone, frozen, or not yet there."""

from __future__ import annotations

import datetime
import http.client
import os
import socket
from collections.abc import Callable, Iterable

from ddpjob import contract

from .resolver import resolve
from .roster import Generation

PROBE_TIMEOUT = 1.0
STORE_TIMEOUT = 5.0  # one store operation, once connected
LOOPBACK = "127.0.0.1"  # this node's own store, in a cluster (NodeStores.address)


class NodeStores:
    """Clients of the nodes' stores, by index; a node that does not answer is simply absent."""

    def __init__(
        self,
        template: str,
        max_nodes: int,
        connect: Callable[[str, int], object] | None = None,
        own: int | None = None,
    ):
        self.template, self.max_nodes, self.own = template, max_nodes, own
        self.clients: dict[int, object] = {}
        self.connect = connect or _tcp_client
        # Each node's launcher serves /progress and /metrics there (contract: the same port
        # on every node, at the node's own name in a cluster); `answers` asks it. None where
        # the store's address is not the launcher's (`ddpjob run`: a node's launcher binds
        # an address of its own), or no port is set: the probe only connects, as before.
        port = os.environ.get(contract.PROGRESS_PORT, "")
        named = contract.INDEX_FIELD in template
        self.launcher_port: int | None = int(port) if named and port.isdigit() and 0 < int(port) < 65536 else None

    def address(self, node: int) -> tuple[str, int]:
        """Where node's store is. This node's own (`own`) at the Pod's loopback address in a
        cluster: its name is the others' way in, and a Pod created again under the name of
        one on a lost node starts while DNS caches still give its predecessor's address or
        none (CoreDNS keeps answers for up to 30 s), which once failed a rejoining node's
        first look at its own store. The launcher's store and HTTP server bind every
        address of the Pod (node_store.py, launch.py)."""
        host, port = contract.node_address(self.template, node)
        if node == self.own and contract.INDEX_FIELD in self.template:
            return LOOPBACK, port
        return host, port

    def alive(self, node: int, timeout: float = PROBE_TIMEOUT) -> bool:
        """Its launcher accepts a connection (no torch client first: one that retries a
        refused connection until its timeout, and logs each try)."""
        return self._reached(node, timeout) is not None

    def _reached(self, node: int, timeout: float) -> str | None:
        """The address at which node's launcher accepted a connection within about
        `timeout` (the name's lookup, bounded: resolver.py, then the connection), or None."""
        host, port = self.address(node)
        address = resolve(host, timeout)
        try:
            if address is None:
                raise OSError(f"{host} does not resolve")
            socket.create_connection((address, port), timeout=timeout).close()
            return address
        except OSError:
            self.clients.pop(node, None)
            return None

    def look_up(self, nodes: Iterable[int]) -> None:
        """Start looking the nodes' names up, waiting for none: a group's members are then
        known by address before any probe needs them while DNS is down (resolver.py)."""
        for node in nodes:
            if node != self.own:
                resolve(self.address(node)[0], 0)

    def answers(self, node: int, timeout: float = PROBE_TIMEOUT) -> bool:
        """Its launcher answers within `timeout`: more than `alive`. A frozen node (paused,
        hung) still accepts connections in its kernel while nothing answers them, so a peer
        that only connects would wait on it for ROUND_WAIT or until the node is marked
        NotReady. A torch store client cannot ask (its handshake with a frozen store waits
        past its own timeout), so the launcher's HTTP endpoint (progress_server.py, on every
        node) is asked instead: any answer at all is a launcher that runs. Peers reach each
        other on every port (gloo's and NCCL's are chosen at random), so no NetworkPolicy
        that lets a job train keeps them from this one."""
        if self.launcher_port is None:
            return self.alive(node, timeout)
        address = self._reached(node, timeout)
        if address is None:
            return False
        conn = http.client.HTTPConnection(address, self.launcher_port, timeout=timeout)
        try:
            conn.request("GET", "/metrics")
            conn.getresponse().close()
            return True
        except (OSError, http.client.HTTPException):
            self.clients.pop(node, None)
            return False
        finally:
            conn.close()

    def store(self, node: int):
        if node not in self.clients:
            self.clients[node] = self.connect(*self.address(node))
        return self.clients[node]

    def call(self, node: int, op: Callable, default=None, retry: bool = True):
        """op(store of node), or `default` when the node does not answer. A kept client that
        fails is made again once if the node answers (`retry`; not for an op that must not
        run twice): its Pod was created again under the same name, a new store at the same
        address, and the old connection leads nowhere."""
        cached = node in self.clients
        try:
            return op(self.store(node))
        except Exception:  # noqa: BLE001 - a dead or re-created store: absent
            self.clients.pop(node, None)
        if not (retry and cached and self.alive(node)):
            return default
        try:
            return op(self.store(node))
        except Exception:  # noqa: BLE001 - as above
            self.clients.pop(node, None)
            return default

    def boot(self, node: int) -> str | None:
        if not self.alive(node):
            return None
        return self.call(node, lambda s: s.get("boot").decode())

    def pointer(self, node: int) -> Generation | None:
        if not self.alive(node):
            return None
        raw = self.call(node, lambda s: s.get("pointer") if s.check(["pointer"]) else None)
        try:
            return Generation.parse(raw) if raw else None
        except (ValueError, KeyError, TypeError):
            return None

    def announce(self, nodes: Iterable[int], key: str, value: str = "1") -> None:
        for node in nodes:  # that `answers`: a frozen node's store holds its caller for good
            if self.answers(node, PROBE_TIMEOUT / 2):
                self.call(node, lambda s: s.set(key, value))


def _tcp_client(host: str, port: int):
    import torch.distributed as dist

    timeout = datetime.timedelta(seconds=STORE_TIMEOUT)
    return dist.TCPStore(host, port, None, False, timeout=timeout, wait_for_workers=False)
