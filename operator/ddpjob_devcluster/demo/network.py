"""The demo cluster's network: a network namespace of its own, so that every Pod gets an
address the endpoint controllers accept, as a cluster's Pod network gives one.

Why: a process kubelet's Pods share this machine, so a Pod's address must be local to
it, and on the host's network only 127/8 is. But an EndpointSlice may not hold a loopback
address (kube-apiserver's ValidateEndpointIP), so kube-controller-manager's EndpointSlice
and Endpoints controllers post `FailedToUpdateEndpoint(Slices)` Warnings for every job's
Service.

So the demo moves itself into a new network namespace before it starts anything
(unshare(CLONE_NEWNET); for a user who is not root, together with a user namespace that
maps only that user, where the kernel allows unprivileged ones). Its loopback interface
carries 127.0.0.1/8, the Pod CIDR (`POD_CIDR`, kind's default Pod subnet: the whole range
is local, as 127/8 is) and the addresses this machine's hostname resolves to (gloo and
torchrun bind what the hostname says). Every process of the cluster starts inside and
inherits it: etcd, the control plane, the operator, each Pod. The host's network is not
touched: the namespace has no other interface, and the kernel removes it with its last
process. Pods therefore reach nothing outside the cluster (no route out).

The cluster is reached from the host through one port, the API server's: `Relay` binds a
free port on the host's 127.0.0.1 before the move, and passes each connection to the same
port inside, where the API server listens. Where the namespace cannot be made, `enter()`
says why and changes nothing: the demo then runs on the host's network with loopback
Pod addresses.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fcntl
import ipaddress
import os
import select
import socket
import struct
import sys
import threading
import time

from ddpjob_devcluster.demo import dns

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
POD_CIDR = ipaddress.IPv4Network("10.244.0.0/16")
PROBE_SECONDS = 10
CONNECT_SECONDS = 10
# <linux/sockios.h>, <net/if.h>
SIOCGIFFLAGS, SIOCSIFFLAGS, SIOCSIFADDR, SIOCSIFNETMASK = 0x8913, 0x8914, 0x8916, 0x891C
IFF_UP = 0x1


class PodAddresses:
    """Pod IPs from the Pod CIDR in turn, as the host-local IPAM plugin hands them out
    (the network's first address is the namespace's own); after the last, the second
    again: a demo that outlives 65,000 Pods reuses the addresses of long-gone ones."""

    def __init__(self, network: ipaddress.IPv4Network = POD_CIDR):
        self.network, self._next, self._lock = network, 2, threading.Lock()

    def __call__(self) -> str:
        with self._lock:
            offset = self._next
            self._next = offset + 1 if offset + 2 < self.network.num_addresses else 2
        return str(self.network.network_address + offset)


def host_addresses() -> list[str]:
    """The IPv4 addresses this machine's hostname resolves to, other than loopback."""
    found: set[str] = set()
    for name in {socket.gethostname(), socket.getfqdn()}:
        with contextlib.suppress(OSError):
            found.update(socket.gethostbyname_ex(name)[2])
    usable = [
        a
        for a in found
        if not ipaddress.IPv4Address(a).is_loopback
        and not ipaddress.IPv4Address(a).is_link_local
        and ipaddress.IPv4Address(a) not in POD_CIDR
    ]
    return sorted(usable)


def enter() -> str | None:
    """Move this process into a network namespace of its own, set up as above; None when
    done, else why not (nothing changed). Call it before any thread or child starts: a
    user namespace can only be entered by a process with one thread."""
    if not sys.platform.startswith("linux"):
        return "network namespaces are Linux only"
    flags = CLONE_NEWNET if os.geteuid() == 0 else CLONE_NEWUSER | CLONE_NEWNET
    if flags & CLONE_NEWUSER and threading.active_count() > 1:
        return "threads already run in this process (a user namespace needs a single thread)"
    servers = _nameservers()  # answered inside (dns.py): with no route out, lookups failed
    addresses = host_addresses() + [a for a in servers if not ipaddress.IPv4Address(a).is_loopback]
    why = _probe(flags, addresses)  # in a child first: a namespace entered cannot be left
    if why is None:
        _enter(flags, addresses)
        with contextlib.suppress(OSError):  # without it, lookups fail as before
            dns.NameServer(servers).start()
    return why


def _nameservers() -> list[str]:
    try:
        with open("/etc/resolv.conf", encoding="utf-8") as f:
            return dns.nameservers(f.read())
    except OSError:
        return []


def _probe(flags: int, addresses: list[str]) -> str | None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: try, report, and exit without running the parent's cleanups
        os.close(read)
        code = 0
        try:
            _enter(flags, addresses)
        except Exception as exc:  # noqa: BLE001 - every failure is a reason to report
            os.write(write, str(exc).encode()[:500])
            code = 1
        os._exit(code)
    os.close(write)
    deadline = time.monotonic() + PROBE_SECONDS
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            os.close(read)
            return f"setting up a network namespace took over {PROBE_SECONDS} s"
        select.select([read], [], [], 0.05)
    said = os.read(read, 1000).decode(errors="replace")
    os.close(read)
    return None if os.waitstatus_to_exitcode(status) == 0 else (said or "the namespace probe failed")


def _enter(flags: int, addresses: list[str]) -> None:
    uid, gid = os.geteuid(), os.getegid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare: {os.strerror(err)}")
    if flags & CLONE_NEWUSER:  # map this user (and group) to itself, nobody else
        for path, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{path}", "w") as f:
                f.write(text)
    gateway = str(POD_CIDR.network_address + 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        current = struct.unpack_from("H", fcntl.ioctl(s, SIOCGIFFLAGS, _ifreq("lo")), 16)[0]
        fcntl.ioctl(s, SIOCSIFFLAGS, _ifreq("lo", struct.pack("H", current | IFF_UP)))
        for i, (address, mask) in enumerate(
            [(gateway, str(POD_CIDR.netmask)), *((a, "255.255.255.255") for a in addresses)], 1
        ):
            fcntl.ioctl(s, SIOCSIFADDR, _ifreq(f"lo:{i}", _sockaddr(address)))
            fcntl.ioctl(s, SIOCSIFNETMASK, _ifreq(f"lo:{i}", _sockaddr(mask)))
    with socket.create_server((str(POD_CIDR.network_address + 2), 0)):
        pass  # a Pod address is bindable: the namespace works


def _ifreq(name: str, data: bytes = b"") -> bytes:
    return struct.pack("16s24s", name.encode(), data)  # struct ifreq: a name and a union


def _sockaddr(address: str) -> bytes:
    return struct.pack("HH4s8s", socket.AF_INET, 0, socket.inet_aton(address), b"")


class Relay:
    """A port on the host's 127.0.0.1, made before `enter()`; `start()` after it passes
    each connection to the same port on the namespace's 127.0.0.1, both ways, until
    either side closes."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Relay:
        ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve(ready)), name="api-relay", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.listener.close()

    async def _serve(self, ready: threading.Event) -> None:
        self._loop, self._stopping = asyncio.get_running_loop(), asyncio.Event()
        server = await asyncio.start_server(self._connection, sock=self.listener)
        ready.set()
        async with server:
            await self._stopping.wait()

    async def _connection(self, outer_reader: asyncio.StreamReader, outer_writer: asyncio.StreamWriter) -> None:
        try:
            inner_reader, inner_writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", self.port), CONNECT_SECONDS
            )
        except (TimeoutError, OSError):
            outer_writer.close()  # the API server is not up (yet): the client sees a reset
            return
        try:
            await asyncio.gather(_pump(outer_reader, inner_writer), _pump(inner_reader, outer_writer))
        finally:
            for writer in (inner_writer, outer_writer):
                writer.close()


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()  # a half-close passes through, as TCP would carry it
    except (ConnectionError, OSError):
        writer.close()
