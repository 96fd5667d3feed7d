"""Peers' names resolved with a deadline (resolver.py): the kind tier's paused node once
took its survivor past 10 s to go on alone, its probe waiting in getaddrinfo, which no
socket timeout bounds, while the cluster's DNS did not answer."""

from __future__ import annotations

import http.server
import socket
import threading
import time

import pytest

from ddpjob import contract
from ddpjob_trainer import node_stores
from ddpjob_trainer.resolver import Resolver

DEADLINE = 10  # seconds a call may take here: a bound for a hang, not a speed claim


class Lookups:
    """getaddrinfo as a script: each name answers with an address, fails, or hangs until
    `release` (a DNS server that does not answer)."""

    def __init__(self) -> None:
        self.answer: dict[str, str | None] = {}
        self.hung: set[str] = set()
        self.release = threading.Event()
        self.calls: list[str] = []

    def __call__(self, host, port, type=0):  # getaddrinfo's own keywords
        self.calls.append(host)
        if host in self.hung:
            self.release.wait(DEADLINE)
        address = self.answer.get(host)
        if address is None:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, 0))]


def timed(call):
    started = time.monotonic()
    result = call()
    return result, time.monotonic() - started


def test_an_address_is_its_own_and_a_name_in_time_gives_its_answer() -> None:
    lookups = Lookups()
    resolve = Resolver(lookups)
    assert resolve("10.244.1.7", 0.1) == "10.244.1.7" and lookups.calls == []
    lookups.answer["job-1.job.ns.svc"] = "10.244.1.7"
    assert resolve("job-1.job.ns.svc", DEADLINE) == "10.244.1.7"
    lookups.answer["job-1.job.ns.svc"] = "10.244.2.9"  # the Pod made again elsewhere
    assert resolve("job-1.job.ns.svc", DEADLINE) == "10.244.2.9"


def test_a_lookup_that_hangs_gives_the_last_address_or_none_by_the_deadline() -> None:
    lookups = Lookups()
    resolve = Resolver(lookups)
    lookups.answer["job-1.job.ns.svc"] = "10.244.1.7"
    assert resolve("job-1.job.ns.svc", DEADLINE) == "10.244.1.7"
    lookups.hung |= {"job-1.job.ns.svc", "job-2.job.ns.svc"}
    try:
        got, took = timed(lambda: resolve("job-1.job.ns.svc", 0.3))
        assert got == "10.244.1.7" and took < DEADLINE / 2
        got, took = timed(lambda: resolve("job-2.job.ns.svc", 0.3))  # never resolved before
        assert got is None and took < DEADLINE / 2
        resolve("job-1.job.ns.svc", 0.1)  # while one lookup of a name hangs, no second starts
        assert lookups.calls.count("job-1.job.ns.svc") == 2, lookups.calls
    finally:
        lookups.release.set()


def test_a_name_that_stops_resolving_is_forgotten() -> None:
    lookups = Lookups()
    resolve = Resolver(lookups)
    lookups.answer["job-1.job.ns.svc"] = "10.244.1.7"
    assert resolve("job-1.job.ns.svc", DEADLINE) == "10.244.1.7"
    del lookups.answer["job-1.job.ns.svc"]  # the Pod deleted: gone from DNS
    assert resolve("job-1.job.ns.svc", DEADLINE) is None
    lookups.hung.add("job-1.job.ns.svc")
    try:
        assert resolve("job-1.job.ns.svc", 0.2) is None  # its old address is not kept for later
    finally:
        lookups.release.set()


@pytest.mark.parametrize("live", [True, False])
def test_a_probe_while_dns_hangs_asks_the_peers_last_address_by_its_deadline(monkeypatch, live) -> None:
    """The survivor's probe of a peer whose name no longer resolves in time: at the address
    it had, a launcher that answers is alive and one that does not is not, within the
    probe's deadline either way (no lookup it waits on)."""
    lookups = Lookups()
    resolve = Resolver(lookups)
    monkeypatch.setattr(node_stores, "resolve", resolve)
    launcher = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    frozen = socket.create_server(("127.0.0.1", 0))  # takes the connection, never answers
    threading.Thread(target=launcher.serve_forever, daemon=True).start()
    try:
        port = launcher.server_address[1] if live else frozen.getsockname()[1]
        monkeypatch.setenv(contract.PROGRESS_PORT, str(port))
        stores = node_stores.NodeStores(f"job-{{index}}.job.ns.svc:{port}", 2, own=0)
        lookups.answer["job-1.job.ns.svc"] = "127.0.0.1"
        stores.look_up((0, 1))  # as the group forms (Watcher.follow): no wait, its own name not asked
        # (Its lookup may have ended before this call, which then makes one of its own.)
        assert resolve("job-1.job.ns.svc", DEADLINE) == "127.0.0.1" and set(lookups.calls) == {"job-1.job.ns.svc"}
        lookups.hung.add("job-1.job.ns.svc")
        got, took = timed(lambda: stores.answers(1, timeout=0.5))
        assert got is live and took < DEADLINE / 2
        del lookups.answer["job-1.job.ns.svc"]
        lookups.release.set()  # the lookup ends: the name is gone, and so is the peer
        deadline = time.monotonic() + DEADLINE
        while stores.answers(1, timeout=0.5) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not stores.answers(1, timeout=0.5)
    finally:
        lookups.release.set()
        launcher.shutdown()
        launcher.server_close()
        frozen.close()
