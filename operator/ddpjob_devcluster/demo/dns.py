"""The demo cluster's name server, inside its network namespace: every question answered
"no such name" at once.

Why: the namespace has no route out (network.py), so a lookup sent to this machine's name
servers failed with EAI_AGAIN, and every Pod's log began with torch's `[c10d] The hostname
of the client socket cannot be retrieved. err=-3`: the rendezvous store asks the name of
each peer's address. A cluster's DNS answers such a question (a Pod's name, or NXDOMAIN),
and `getnameinfo` then falls back to the numeric address, quietly. So `network.enter()`
puts the addresses of /etc/resolv.conf's name servers on the namespace's loopback and
this server answers there: NXDOMAIN to every query (nothing outside the cluster can be
reached from the namespace anyway; the Pods reach each other by address).
"""

from __future__ import annotations

import contextlib
import ipaddress
import select
import socket
import struct
import threading

DNS_PORT = 53
NXDOMAIN = 3
QR, RA = 0x8000, 0x0080
OPCODE_AND_RD = 0x7900  # what a response keeps of its query's flags (RFC 1035 4.1.1)


def nameservers(resolv_conf: str) -> list[str]:
    """The IPv4 name servers a resolv.conf names, in order."""
    found = []
    for line in resolv_conf.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "nameserver":
            with contextlib.suppress(ValueError):
                if ipaddress.ip_address(words[1]).version == 4 and words[1] not in found:
                    found.append(words[1])
    return found


def answer(query: bytes) -> bytes | None:
    """The NXDOMAIN response to a DNS query: its id and first question back, QR set,
    RCODE 3; None for what is no query."""
    if len(query) < 12:
        return None
    ident, flags, questions = struct.unpack_from("!HHH", query)
    if flags & QR or questions < 1:
        return None
    end = 12
    while end < len(query) and query[end]:  # the question's name: labels up to a zero byte
        if query[end] & 0xC0:
            return None  # no compression in a question that comes first
        end += 1 + query[end]
    end += 1 + 4  # the zero byte, QTYPE and QCLASS
    if end > len(query):
        return None
    header = struct.pack("!HHHHHH", ident, QR | (flags & OPCODE_AND_RD) | RA | NXDOMAIN, 1, 0, 0, 0)
    return header + query[12:end]


class NameServer:
    """Answers on UDP port 53 of each address, from a thread, for this process's life."""

    def __init__(self, addresses: list[str]):
        self.sockets = []
        for address in addresses:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((address, DNS_PORT))
            self.sockets.append(s)
        self.thread = threading.Thread(target=self._serve, name="demo-dns", daemon=True)

    def start(self) -> NameServer:
        self.thread.start()
        return self

    def _serve(self) -> None:
        while True:
            ready, _, _ = select.select(self.sockets, [], [])
            for s in ready:
                with contextlib.suppress(OSError):
                    query, peer = s.recvfrom(4096)
                    reply = answer(query)
                    if reply is not None:
                        s.sendto(reply, peer)
