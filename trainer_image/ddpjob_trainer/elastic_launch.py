"""An elastic job's launch: torchrun's c10d rendezvous over MIN:MAX nodes, and rejoining
when the rendezvous itself is lost.

torchrun re-forms the group by itself when a node leaves or joins: it stops its workers
and starts them again in the new group (the trainer resumes from its checkpoint). What it
cannot survive is the loss of the c10d store, which lives in Pod 0's torchrun: every
other torchrun then ends with a rendezvous error. The operator re-creates Pod 0 under the
same name (and DNS name), so here each survivor starts torchrun again, after waiting for
that name, until the rendezvous is back or `REJOIN_SECONDS` have passed; its Pod is never
restarted, and no gang restart happens.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, MutableMapping

from ddpjob import contract

from . import EXIT_RENDEZVOUS_TIMEOUT, RendezvousTimeout
from .env import LaunchEnv

# How long a survivor keeps trying to rejoin a lost rendezvous: Pod 0 re-created, scheduled
# and started. Past it the Pod fails (retryable) and the operator's rules take over.
REJOIN_SECONDS = 600.0
REJOIN_BACKOFF = (1.0, 30.0)  # first delay, cap; doubling


def set_defaults(env: MutableMapping[str, str] | None = None) -> None:
    """The contract's elastic defaults, for a launcher started by hand (a Pod has them)."""
    target = os.environ if env is None else env
    for name, value in contract.ELASTIC_DEFAULTS.items():
        target.setdefault(name, value)


def torchrun_args(launch: LaunchEnv, env: Mapping[str, str] | None = None) -> list[str]:
    """torchrun's flags for an elastic job, from the contract (PET_RDZV_*), with defaults
    for a launcher started by hand with NNODES=MIN:MAX."""
    env = os.environ if env is None else env
    endpoint = env.get(contract.RDZV_ENDPOINT) or f"{launch.master_addr}:{launch.master_port}"
    conf = env.get(contract.RDZV_CONF) or contract.rdzv_conf(launch.node_rank)
    restarts = env.get(contract.MAX_RESTARTS) or str(contract.ELASTIC_RESTARTS_PER_NODE * launch.nnodes)
    return [
        "--nnodes",
        f"{launch.min_nodes}:{launch.nnodes}",
        "--nproc-per-node",
        str(launch.nproc_per_node),
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        endpoint,
        "--rdzv-id",
        env.get(contract.RDZV_ID) or "ddpjob",
        "--rdzv-conf",
        conf,
        "--max-restarts",
        restarts,
    ]


def run_rejoining(
    run: Callable[[], int],
    wait_for_master: Callable[[float], None],
    stopping: Callable[[], bool],
    log: Callable[[str], None],
    budget: float = REJOIN_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Run torchrun (`run`) again while it ends because the rendezvous was lost, with backoff,
    for at most `budget` seconds from the first loss; any other end is returned as is."""
    first_loss, delay = None, REJOIN_BACKOFF[0]
    while True:
        code = run()
        if code != EXIT_RENDEZVOUS_TIMEOUT or stopping():
            return code
        now = clock()
        first_loss = now if first_loss is None else first_loss
        left = budget - (now - first_loss)
        if left <= 0:
            log(f"error: the rendezvous did not come back within {budget:.0f}s")
            return code
        log(f"the rendezvous was lost (Pod 0 gone?): rejoining in {delay:g}s ({left:.0f}s left)")
        sleep(min(delay, left))
        delay = min(delay * 2, REJOIN_BACKOFF[1])
        try:
            wait_for_master(max(1.0, left - delay))
        except RendezvousTimeout as e:
            log(f"error: {e}")
            return code
