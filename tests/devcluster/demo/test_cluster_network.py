"""The demo cluster's network namespace (`demo/network.py`): Pod addresses an
EndpointSlice may hold, a probe that changes nothing when the namespace cannot be made,
and the relay that publishes the API server's port on the host's loopback.

The namespace itself is only ever entered by a child process here: a namespace entered
cannot be left, and the test process must keep the host's network."""

from __future__ import annotations

import ipaddress
import os
import socket
import subprocess
import sys
import textwrap

import pytest

from ddpjob_devcluster.clusters.client import ROOT
from ddpjob_devcluster.demo import network as cluster_network


def test_pod_addresses_come_in_turn_from_the_pod_cidr_and_wrap_around() -> None:
    addresses = cluster_network.PodAddresses()
    first = [addresses() for _ in range(3)]
    assert first == ["10.244.0.2", "10.244.0.3", "10.244.0.4"]
    small = cluster_network.PodAddresses(ipaddress.IPv4Network("10.9.0.0/29"))  # .2 to .6
    assert [small() for _ in range(6)] == ["10.9.0.2", "10.9.0.3", "10.9.0.4", "10.9.0.5", "10.9.0.6", "10.9.0.2"]
    for address in first:  # what ValidateEndpointIP refuses: loopback, link-local, unspecified
        ip = ipaddress.ip_address(address)
        assert not (ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast)


def test_a_probe_that_fails_leaves_this_process_on_the_hosts_network(monkeypatch) -> None:
    def refused(flags: int, addresses: list[str]) -> None:
        raise OSError(1, "unshare: Operation not permitted")

    before = os.readlink("/proc/self/ns/net")
    monkeypatch.setattr(cluster_network, "_enter", refused)  # the forked probe runs this one
    monkeypatch.setattr(cluster_network.threading, "active_count", lambda: 1)
    assert cluster_network.enter() == "[Errno 1] unshare: Operation not permitted"
    assert os.readlink("/proc/self/ns/net") == before


RELAYED = textwrap.dedent("""
    import socket, sys
    from ddpjob_devcluster.demo import network as cluster_network
    relay = cluster_network.Relay()
    why = cluster_network.enter()
    if why:
        print('NO-NAMESPACE', why, flush=True)
        sys.exit(0)
    relay.start()
    inside = socket.create_server(('127.0.0.1', relay.port))  # free inside: a network of its own
    pod = socket.create_server((cluster_network.PodAddresses()(), 0))
    print('PORT', relay.port, pod.getsockname()[0], flush=True)
    conn, _ = inside.accept()
    data = b''
    while chunk := conn.recv(100):  # until the client's half-close passes through
        data += chunk
    conn.sendall(b'inside got ' + data)
    conn.close()
    relay.stop()
""")


def test_the_relay_passes_a_connection_from_the_host_into_the_namespace_both_ways() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", RELAYED],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "operator")),
    )
    assert child.stdout is not None  # PIPE
    try:
        words = child.stdout.readline().split()
        if words[:1] == ["NO-NAMESPACE"]:
            pytest.skip(f"no network namespace can be made here: {' '.join(words[1:])}")
        assert words[0] == "PORT", words
        port, pod_ip = int(words[1]), words[2]
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"hello")
            s.shutdown(socket.SHUT_WR)
            reply = b""
            while chunk := s.recv(100):
                reply += chunk
        assert reply == b"inside got hello"
        # The Pod address is the namespace's alone: the host's network has no such address.
        with pytest.raises(OSError, match="assign"):
            socket.create_server((pod_ip, 0)).close()
        assert child.wait(10) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
