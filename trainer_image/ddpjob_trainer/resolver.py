"""Host names resolved with a deadline, for the probes of an in-place elastic group's peers
(node_stores.py). A socket's own timeout does not cover the name's lookup: getaddrinfo has
none, and the cluster's DNS may be what the fault took. A node that dies or freezes takes
with it any CoreDNS replica it ran, and until that replica leaves the Service's endpoints
(once its node is NotReady) some of every Pod's queries go to it and wait out the resolver's
timeout (5 s, tried twice); the name of a Pod that is not Ready is not served at all, and a
resolver with search domains then asks the upstream DNS, which an air-gapped cluster never
answers. A probe that waits on that finds a frozen peer 5 to 10 s late.

So each name is looked up on a thread of its own (one at a time per name), and a caller
waits at most its deadline: a lookup that ends in time gives its answer (an address, or
none: the name is gone), one that does not gives the address the name had the last time
it resolved, if it ever did. The peers of a group resolved before it formed, so the
address a probe gets while DNS is down is the one the peer had in the group."""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable


class Resolver:
    def __init__(self, lookup: Callable[..., list] = socket.getaddrinfo) -> None:
        self.lookup = lookup
        self._lock = threading.Lock()
        self._last: dict[str, str] = {}  # name: the address it last resolved to
        self._pending: dict[str, threading.Thread] = {}

    def __call__(self, host: str, timeout: float) -> str | None:
        """host's address within `timeout` seconds (an address is its own); None when the
        name does not resolve, or did not in time and never did before."""
        try:
            return str(ipaddress.ip_address(host))
        except ValueError:
            pass
        with self._lock:
            thread = self._pending.get(host)
            if thread is None:
                thread = threading.Thread(target=self._resolve, args=(host,), name="ddpjob-resolve", daemon=True)
                self._pending[host] = thread
                thread.start()
        thread.join(timeout)
        with self._lock:
            return self._last.get(host)

    def _resolve(self, host: str) -> None:
        try:
            address: str | None = str(self.lookup(host, None, type=socket.SOCK_STREAM)[0][4][0])
        except (OSError, IndexError, UnicodeError):
            address = None  # gone from DNS (its Pod deleted or not Ready), or unresolvable
        with self._lock:
            if address is None:
                self._last.pop(host, None)
            else:
                self._last[host] = address
            self._pending.pop(host, None)


resolve = Resolver()  # shared: every client of this process learns each peer's address once
