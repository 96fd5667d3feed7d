"""A launcher that serves its node's store (an elastic job resizing in place) ends without
the interpreter's finalization (in_place_launch.leave): the finalization destroys the
store's TCPStore server while a thread may be inside it taking the operator's notice of a
lost node, and the process then died of SIGABRT or SIGSEGV after its workers had
finished, failing its Pod and restarting the finished job's gang."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap

import pytest

# A node's store taking notices on threads of their own, as the progress server's do, while
# the launcher's workers end; then the launcher's end, as launch.main ends it.
PROGRAM = textwrap.dedent(
    """
    import sys, threading
    from ddpjob_trainer import in_place_launch
    from ddpjob_trainer.node_store import NodeStore
    from ddpjob_trainer.roster import Generation

    store = NodeStore("127.0.0.1", int(sys.argv[1]))
    store.server.set("pointer", Generation(1, (0, 1, 2), 1, ("a", "b", "c"), (5, 5, 5), 0).text())
    taken = threading.Event()

    def take_notices():
        while True:
            store.notice((2,))
            taken.set()

    for _ in range(2):
        threading.Thread(target=take_notices, daemon=True).start()
    taken.wait(30)
    in_place_launch.leave(int(sys.argv[2]))
    """
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("code", [0, 0, 0, 143])
def test_a_launcher_taking_notices_as_it_ends_exits_with_its_own_code(code: int) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(free_port()), str(code)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == code, done.stderr[-3000:]
