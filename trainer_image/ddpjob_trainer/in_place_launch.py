"""An elastic job's launch when its program resizes in place (elastic.py): the launcher
serves the node's store (node_store.py) and takes the operator's notices, and torchrun
only starts and watches this node's workers (`--standalone`, one node): it never meets
the other nodes, so no rendezvous of its own ever restarts the workers when one leaves or
joins (torchrun's elastic agent restarts every worker at each change, `num_nodes_waiting`
included). The workers find each other through the nodes' stores.

Which programs: `ddpjob-train` (it uses the API) in a Pod of an elastic job
(DDPJOB_NODE_ADDRESS is set) unless its backend is nccl (the NCCL path is written, through
the communicator's abort and shrink, but not measured yet: such jobs keep torchrun's
restart), and any program run with `--resize in-place` (it must use
`ddpjob_trainer.elastic`); `--resize restart` keeps torchrun's elastic agent for any.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from collections.abc import Callable
from typing import NoReturn

from ddpjob import contract

from . import UsageError
from .env import LaunchEnv

IN_PLACE, RESTART = "in-place", "restart"
# Seconds a launcher waits for its name to lead the others to its store: DNS caches keep a
# name's old answer (or its absence) for up to 30 s (CoreDNS's cache), plus the endpoints'
# own propagation.
NAME_WAIT = 45.0
NAME_LOG_EVERY = 10.0
MODES = (IN_PLACE, RESTART)
# Set for the workers: how ddpjob-train knows it resizes in place.
RESIZE_ENV = "DDPJOB_RESIZE"


def mode(launch: LaunchEnv, program: str, asked: str | None, env=None) -> str | None:
    """The resize mode of an elastic job's launch (None: not elastic)."""
    env = os.environ if env is None else env
    if not launch.elastic:
        if asked:
            raise UsageError(f"--resize {asked}: only an elastic job (NNODES=MIN:MAX) resizes")
        return None
    if asked:
        return asked
    nccl = (env.get(contract.BACKEND) or "").strip().lower() == "nccl"
    # Without the nodes' addresses (a launcher started by hand) the nodes cannot find each other.
    return IN_PLACE if program == "ddpjob-train" and not nccl and env.get(contract.NODE_ADDRESS) else RESTART


def worker_env(env=None) -> None:
    """The workers' environment: torchrun's PET_* defaults are the job's rendezvous, which a
    one-node torchrun must not take (is_host=0 would leave its own store unserved)."""
    env = os.environ if env is None else env
    for name in [n for n in env if n.startswith(contract.TORCHRUN_PREFIX)]:
        del env[name]
    env[RESIZE_ENV] = IN_PLACE


def torchrun_argv(launch: LaunchEnv, target: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "ddpjob_trainer._torchrun",
        "--standalone",
        "--nnodes",
        "1",
        "--nproc-per-node",
        str(launch.nproc_per_node),
        "--max-restarts",
        "0",
        *target,
    ]


def serve_store(launch: LaunchEnv, env=None):
    """The node's store, where the others look for it (DDPJOB_NODE_ADDRESS with this node's
    index): every address of the Pod in a cluster (its DNS name points at them), this
    node's own loopback address on one machine (the template's host is an address there)."""
    from .node_store import NodeStore

    env = os.environ if env is None else env
    template = env.get(contract.NODE_ADDRESS)
    if not template:
        raise UsageError(f"--resize {IN_PLACE} needs {contract.NODE_ADDRESS} (an elastic job's Pod has it)")
    try:
        host, port = contract.node_address(template, launch.node_rank)
    except ValueError as e:
        raise UsageError(str(e)) from None
    return NodeStore("" if contract.INDEX_FIELD in template else host, port)


def leave(code: int) -> NoReturn:
    """The end of a launcher that serves its node's store: at once, without the
    interpreter's finalization. The store is a TCPStore server (its own native threads,
    its listening socket) that the finalization destroys in no set order, while a thread
    of the progress server may be inside it taking the operator's notice of a lost node:
    the process then died of SIGABRT or SIGSEGV in a native thread (seen on the kind tier
    in a newcomer's Pod after the training was over: a 139 that restarted the finished
    job's gang; and every time in tests/trainer/test_launcher_end.py, notices coming).
    Exit handlers run and the streams are flushed first (quick_exit.py)."""
    from .quick_exit import exit_now

    exit_now(code)


def await_own_name(
    store,
    launch: LaunchEnv,
    log: Callable[[str], None],
    env=None,
    timeout: float = NAME_WAIT,
    boot_at_name: Callable[[], str | None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Wait until this node's name leads to this node's store (its boot answers there), so
    the others' probes find the node that joins rather than judging it lost. A Pod created
    again under the name of one on a lost node starts while DNS still gives its
    predecessor's address or none. Never fatal: after `timeout` the workers start anyway
    (the others find it once their answers change); one machine has no names to wait for."""
    from .node_stores import NodeStores

    env = os.environ if env is None else env
    template = env.get(contract.NODE_ADDRESS) or ""
    if contract.INDEX_FIELD not in template:
        return True
    # No `own` for these clients: the name, the way the others come.
    ask = boot_at_name or functools.partial(NodeStores(template, launch.nnodes).boot, launch.node_rank)
    name = contract.node_address(template, launch.node_rank)[0]
    start = said = clock()
    while ask() != store.boot:
        now = clock()
        if now - start >= timeout:
            log(f"warning: {name} did not lead to this node's store within {timeout:.0f}s; starting anyway")
            return False
        if now - said >= NAME_LOG_EVERY:
            log(f"waiting for {name} to lead to this node's store ({now - start:.0f}s/{timeout:.0f}s)")
            said = now
        sleep(1.0)
    return True
