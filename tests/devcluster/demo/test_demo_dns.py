"""The demo namespace's name server (`demo/dns.py`): NXDOMAIN to every question, so a
lookup of a Pod's address falls back to the number quietly instead of failing with
EAI_AGAIN (torch's `[c10d] The hostname of the client socket cannot be retrieved. err=-3`
at the top of every Pod's log)."""

from __future__ import annotations

import os
import pathlib
import struct
import subprocess
import sys
import textwrap

import pytest

from ddpjob_devcluster.clusters.client import ROOT
from ddpjob_devcluster.demo import dns

# A PTR query for 9.0.244.10.in-addr.arpa, id 0x1234, recursion desired.
QUERY = (
    struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    + b"".join(bytes([len(label)]) + label for label in (b"9", b"0", b"244", b"10", b"in-addr", b"arpa"))
    + b"\0"
    + struct.pack("!HH", 12, 1)
)


def test_every_question_is_answered_no_such_name():
    reply = dns.answer(QUERY)
    ident, flags, questions, answers, authority, additional = struct.unpack_from("!HHHHHH", reply)
    assert (ident, questions, answers, authority, additional) == (0x1234, 1, 0, 0, 0)
    assert flags & 0x8000 and flags & 0x0100 and flags & 0xF == dns.NXDOMAIN  # a response, RD kept, NXDOMAIN
    assert reply[12:] == QUERY[12:]  # the question, echoed
    assert dns.answer(reply) is None and dns.answer(QUERY[:20]) is None and dns.answer(b"") is None


def test_the_name_servers_of_a_resolv_conf():
    text = "# comment\nnameserver 10.255.255.53\nsearch example\nnameserver ::1\nnameserver 127.0.0.53\n"
    assert dns.nameservers(text) == ["10.255.255.53", "127.0.0.53"]


LOOKUP = textwrap.dedent("""
    import socket, sys
    from ddpjob_devcluster.demo import network as cluster_network
    why = cluster_network.enter()
    if why:
        print('NO-NAMESPACE', why, flush=True)
        sys.exit(0)
    try:
        print('NAME', socket.getnameinfo((cluster_network.PodAddresses()(), 29500), 0)[0], flush=True)
    except OSError as e:
        print('FAILED', e, flush=True)
""")


def test_inside_the_namespace_a_pod_address_is_named_by_its_number():
    out = subprocess.run(
        [sys.executable, "-c", LOOKUP],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "operator")),
    ).stdout.split()
    if out[:1] == ["NO-NAMESPACE"]:
        pytest.skip(f"no network namespace can be made here: {' '.join(out[1:])}")
    if not dns.nameservers(pathlib.Path("/etc/resolv.conf").read_text()):
        pytest.skip("this machine names no IPv4 name server")
    assert out == ["NAME", "10.244.0.2"], out
