"""The environment contract: the variables every trainer process gets, and what they mean.

One home for the names. The renderer writes them into each Pod (`pod_env`), the local
runner points the cluster-only ones at this machine (`local_overrides`), the API refuses
them in `spec.env` (`RESERVED`), and the trainer reads them (`ddpjob_trainer.env`).
Pure and dependency-free: the trainer image imports it without jinja2, kopf or yaml.
"""

from __future__ import annotations

from typing import Any

DEFAULT_PORT = 29500

# torchrun reads PET_<NAME> as the default of its --<name> flag, so `torchrun train.py`
# needs no flags inside a Pod; the plain names serve scripts and ddpjob-launch.
MASTER_ADDR, MASTER_PORT = "MASTER_ADDR", "MASTER_PORT"
NNODES, NODE_RANK, NPROC_PER_NODE = "NNODES", "NODE_RANK", "NPROC_PER_NODE"
WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE = "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"
JOB_NAME, JOB_NAMESPACE = "DDPJOB_NAME", "DDPJOB_NAMESPACE"
RESTART_COUNT, BACKEND, CHECKPOINT_DIR = "DDPJOB_RESTART_COUNT", "DDPJOB_BACKEND", "DDPJOB_CHECKPOINT_DIR"

TORCHRUN_PREFIX = "PET_"
# Set under both spellings (plain and PET_).
NODE_LEVEL = (MASTER_ADDR, MASTER_PORT, NNODES, NODE_RANK, NPROC_PER_NODE)

# name -> meaning; docs/design.md's table is checked against it.
MEANING: dict[str, str] = {
    MASTER_ADDR: "DNS name of Pod 0 (`J-0.J.NS.svc`); 127.0.0.1 under `ddpjob run`",
    MASTER_PORT: "rendezvous port, `spec.port`; a free port under `ddpjob run`",
    NNODES: "number of Pods in the gang, `spec.nodes`",
    NODE_RANK: "this Pod's index, 0..nodes-1",
    NPROC_PER_NODE: "processes in this Pod (resolved `spec.nprocPerNode`)",
    WORLD_SIZE: "nodes x processes per node",
    RANK: "global rank; set only when one process runs per Pod (torchrun sets it otherwise)",
    LOCAL_RANK: "0; set only when one process runs per Pod",
    LOCAL_WORLD_SIZE: "1; set only when one process runs per Pod",
    JOB_NAME: "the DDPJob's name",
    JOB_NAMESPACE: "the DDPJob's namespace",
    RESTART_COUNT: "the gang attempt (0, 1, ...): `status.restarts` when the Pods were made",
    BACKEND: "resolved backend: nccl or gloo",
    CHECKPOINT_DIR: "mount path of the checkpoint volume, when `spec.checkpoint` is set",
}

# What users may not set in `spec.env`: the operator and the local runner own these.
RESERVED = frozenset(MEANING) | frozenset(TORCHRUN_PREFIX + n for n in NODE_LEVEL)


def _pairs(job: Any, master_addr: str, node_rank: int, restart_count: int) -> list[tuple[str, str]]:
    both = lambda name, value: [(name, value), (TORCHRUN_PREFIX + name, value)]  # noqa: E731
    pairs = [
        *both(MASTER_ADDR, master_addr), *both(MASTER_PORT, str(job.port)),
        *both(NNODES, str(job.nodes)), *both(NODE_RANK, str(node_rank)),
        *both(NPROC_PER_NODE, str(job.nproc_per_node)),
        (WORLD_SIZE, str(job.world_size)),
    ]
    if job.nproc_per_node == 1:
        # One process per Pod: a plain init_process_group("env://") script works unchanged.
        pairs += [(RANK, str(node_rank)), (LOCAL_RANK, "0"), (LOCAL_WORLD_SIZE, "1")]
    pairs += [(JOB_NAME, job.name), (JOB_NAMESPACE, job.namespace),
              (RESTART_COUNT, str(restart_count)), (BACKEND, job.backend)]
    if job.checkpoint:
        pairs.append((CHECKPOINT_DIR, job.checkpoint.mount_path))
    return pairs


def pod_env(job: Any, master_addr: str, node_rank: int, restart_count: int = 0) -> list[dict[str, str]]:
    """The contract as a container's `env`, in a fixed order. `job` is an api.spec.DDPJob."""
    return [{"name": k, "value": v} for k, v in _pairs(job, master_addr, node_rank, restart_count)]


def local_overrides(port: int, checkpoint_dir: str | None) -> dict[str, str]:
    """The values that only make sense in a cluster, pointed at this machine."""
    env = {MASTER_ADDR: "127.0.0.1", TORCHRUN_PREFIX + MASTER_ADDR: "127.0.0.1",
           MASTER_PORT: str(port), TORCHRUN_PREFIX + MASTER_PORT: str(port)}
    if checkpoint_dir is not None:
        env[CHECKPOINT_DIR] = str(checkpoint_dir)
    return env
