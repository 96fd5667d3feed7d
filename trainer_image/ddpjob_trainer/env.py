"""The environment contract (`ddpjob.contract` owns the names), read once at the edges and typed.

Two readers: `read_launch_env` for the launcher (node-level: NNODES, NODE_RANK, ...) and
`read_process_env` for one training process (RANK, LOCAL_RANK, ... as set by torchrun,
or by the contract itself when a Pod runs one process). Both fail with a UsageError
naming the variable rather than guessing: a wrong world size is a silently wrong run.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass

from ddpjob import contract

from . import UsageError

DEFAULT_PORT = contract.DEFAULT_PORT
# The node-level variables; their presence means "an operator or local runner set me up".
_NODE_VARS = contract.NODE_LEVEL


def _get(env: Mapping[str, str], name: str) -> str | None:
    # torchrun reads PET_* as its defaults; the contract sets both spellings, accept either.
    value = env.get(name)
    if value is None or value == "":
        value = env.get(contract.TORCHRUN_PREFIX + name)
    return value if value not in (None, "") else None


def _int(env: Mapping[str, str], name: str, default: int | None = None, minimum: int = 0) -> int:
    raw = _get(env, name)
    if raw is None:
        if default is None:
            raise UsageError(f"environment variable {name} is not set")
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise UsageError(f"environment variable {name}={raw!r} is not an integer") from None
    if value < minimum:
        raise UsageError(f"environment variable {name}={value} must be >= {minimum}")
    return value


def local_gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:  # noqa: BLE001 - no torch or a broken driver, however it fails: behave like a CPU box
        return 0


@dataclass(frozen=True)
class LaunchEnv:
    nnodes: int  # an elastic job's most
    node_rank: int
    nproc_per_node: int
    master_addr: str
    master_port: int
    from_contract: bool  # False: plain `docker run`, single-node defaults
    min_nodes: int | None = None  # set for an elastic job (NNODES=MIN:MAX)

    @property
    def elastic(self) -> bool:
        return self.min_nodes is not None


def _nnodes(env: Mapping[str, str]) -> tuple[int, int | None]:
    """(most, least): NNODES is a count, or an elastic job's MIN:MAX (torchrun's syntax)."""
    raw = _get(env, contract.NNODES)
    if raw is None or ":" not in raw:
        return _int(env, contract.NNODES, minimum=1), None
    lo, _, hi = raw.partition(":")
    if not (lo.strip().isdigit() and hi.strip().isdigit()) or not 1 <= int(lo) <= int(hi):
        raise UsageError(f"environment variable NNODES={raw!r} is not a count or MIN:MAX with 1 <= MIN <= MAX")
    return int(hi), int(lo)


def read_launch_env(env: Mapping[str, str] | None = None) -> LaunchEnv:
    env = os.environ if env is None else env
    if not any(_get(env, name) for name in _NODE_VARS):
        # No contract at all (plain `docker run`): one node using every local GPU.
        return LaunchEnv(1, 0, max(1, local_gpu_count()), "127.0.0.1", DEFAULT_PORT, False)
    nnodes, min_nodes = _nnodes(env)
    node_rank = _int(env, contract.NODE_RANK)
    if node_rank >= nnodes:
        raise UsageError(f"environment variable NODE_RANK={node_rank} must be < NNODES={nnodes}")
    nproc = _int(env, contract.NPROC_PER_NODE, minimum=1)
    addr = _get(env, contract.MASTER_ADDR)
    if addr is None:
        raise UsageError("environment variable MASTER_ADDR is not set")
    port = _int(env, contract.MASTER_PORT, minimum=1)
    if port > 65535:
        raise UsageError(f"environment variable MASTER_PORT={port} is not a TCP port")
    return LaunchEnv(nnodes, node_rank, nproc, addr, port, True, min_nodes)


@dataclass(frozen=True)
class ProcessEnv:
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    restart_count: int
    backend: str | None  # DDPJOB_BACKEND: None means "pick from the device"
    checkpoint_dir: str | None
    job_name: str | None
    elastic_max_nodes: int | None = None  # an elastic job's maxNodes (NNODES=MIN:MAX): elastic_data.py

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def read_process_env(env: Mapping[str, str] | None = None) -> ProcessEnv:
    env = os.environ if env is None else env
    restart = _int(env, contract.RESTART_COUNT, default=0)
    backend = (env.get(contract.BACKEND) or "").strip().lower() or None
    if backend == "auto":
        backend = None
    if backend not in (None, "nccl", "gloo", "mpi", "xccl"):
        raise UsageError(f"environment variable DDPJOB_BACKEND={backend!r} is not nccl or gloo")
    make = functools.partial(
        ProcessEnv,
        restart_count=restart,
        backend=backend,
        checkpoint_dir=env.get(contract.CHECKPOINT_DIR) or None,
        job_name=env.get(contract.JOB_NAME) or None,
        elastic_max_nodes=_nnodes(env)[0] if ":" in (_get(env, contract.NNODES) or "") else None,
    )
    world = _int(env, contract.WORLD_SIZE, default=1, minimum=1)
    if contract.RANK not in env:
        if world > 1:
            # The contract sets WORLD_SIZE = nodes x procs but RANK only when procs == 1:
            # this process was started by hand in a multi-process Pod.
            raise UsageError(
                f"WORLD_SIZE={world} but RANK is not set: start ddpjob-train through ddpjob-launch or torchrun"
            )
        return make(0, 0, 1, 1)
    rank = _int(env, contract.RANK)
    if rank >= world:
        raise UsageError(f"environment variable RANK={rank} must be < WORLD_SIZE={world}")
    local_rank = _int(env, contract.LOCAL_RANK, default=0)
    local_world = _int(env, contract.LOCAL_WORLD_SIZE, default=1, minimum=1)
    return make(rank, local_rank, world, local_world)


def available_cpus(cpu_max: str | None = None) -> int:
    """CPUs this container may use: its cpuset, capped by a CFS quota (a Pod's CPU limit
    shows up only in cgroup v2's cpu.max, never in the cpuset or os.cpu_count())."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    if cpu_max is None:
        try:
            with open("/sys/fs/cgroup/cpu.max") as f:
                cpu_max = f.read()
        except OSError:
            cpu_max = ""
    quota, _, period = cpu_max.strip().partition(" ")
    if quota.isdigit() and period.isdigit() and int(period) > 0:
        cpus = min(cpus, max(1, -(-int(quota) // int(period))))  # a limit of 1.5 CPUs gives 2 threads
    return cpus


def threads_per_process(nproc_per_node: int, cpus: int | None = None) -> int:
    return max(1, (cpus or available_cpus()) // max(1, nproc_per_node))
