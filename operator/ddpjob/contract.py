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
# The progress contract (ddpjob.progress_record): where a process may write the job's
# progress record, and the port on which ddpjob-launch serves it (/progress, /metrics).
PROGRESS_FILE, PROGRESS_PORT = "DDPJOB_PROGRESS_FILE", "DDPJOB_PROGRESS_PORT"
# The address ddpjob-launch binds; unset in a Pod (all of the Pod's addresses). Only the
# local runners set it: Pods that share this machine's network each get a loopback address.
PROGRESS_HOST = "DDPJOB_PROGRESS_HOST"
# Where a container leaves its termination message: the Pod's terminationMessagePath (the
# kubelet's default, which it reads when the container ends). Unset in a Pod; only the
# local runners set it, to a file of the Pod's own directory that they read the same way.
# ddpjob-launch writes a finished run's last progress record there.
TERMINATION_LOG = "DDPJOB_TERMINATION_LOG"
DEFAULT_TERMINATION_LOG = "/dev/termination-log"
# Where the trainer writes TensorBoard event files. Unset in a Pod (`<checkpoint dir>/
# tensorboard/<job name>`, on the volume a TensorBoard can read); only `ddpjob run` sets it,
# to this run's folder in the job's directory (`./.ddpjob/<name>/tensorboard/<run>`).
TENSORBOARD_DIR = "DDPJOB_TENSORBOARD_DIR"
COLLECTIVE_TIMEOUT = "DDPJOB_COLLECTIVE_TIMEOUT_SECONDS"
# An elastic job's nodes, each reachable at its launcher's store (a resize in place:
# ddpjob_trainer.roster): `{index}` in the host stands for the node's index.
NODE_ADDRESS = "DDPJOB_NODE_ADDRESS"
INDEX_FIELD = "{index}"
# The key of one job's notices (ddpjob.notice): set by the operator or `ddpjob run` when
# it starts a Pod, never rendered (`ddpjob render` has none).
NOTICE_TOKEN = "DDPJOB_NOTICE_TOKEN"

# An emptyDir every Pod gets, so the record has a writable home under a read-only root.
PROGRESS_DIR = "/run/ddpjob"
PROGRESS_PATH = PROGRESS_DIR + "/progress.json"
DEFAULT_PROGRESS_PORT = 29510
PROGRESS_PORT_NAME = "progress"

TORCHRUN_PREFIX = "PET_"
# Set under both spellings (plain and PET_).
NODE_LEVEL = (MASTER_ADDR, MASTER_PORT, NNODES, NODE_RANK, NPROC_PER_NODE)

# An elastic job's rendezvous, as torchrun's own flags (PET_<FLAG>), so that `torchrun
# train.py` in a Pod is elastic with no flags: c10d, its store hosted by Pod 0's torchrun
# (`is_host` says which one, also where every Pod shares 127.0.0.1 under `ddpjob run`).
RDZV_BACKEND, RDZV_ENDPOINT, RDZV_ID = "PET_RDZV_BACKEND", "PET_RDZV_ENDPOINT", "PET_RDZV_ID"
RDZV_CONF, MAX_RESTARTS = "PET_RDZV_CONF", "PET_MAX_RESTARTS"
# Each lost Pod costs every survivor's torchrun one restart of its workers (a Pod that
# joins costs none): a budget of this many per node of the range.
ELASTIC_RESTARTS_PER_NODE = 4
# Once minNodes have joined, how long the rendezvous waits for more before it starts
# training (torchrun's default, 30 s, is also how long survivors stand idle after a loss).
LAST_CALL_SECONDS = 10
# A node whose heartbeat is this many intervals late is dropped from the rendezvous:
# 2 s x 3 (torchrun's 5 s x 3 kept the survivors of a lost Pod waiting 15 s for it).
KEEP_ALIVE_SECONDS, KEEP_ALIVE_ATTEMPTS = 2, 3


def node_address(template: str, index: int) -> tuple[str, int]:
    """(host, port) of node `index` from NODE_ADDRESS: `{index}` in the host is the index
    (a cluster's `J-{index}.J.NS.svc`); an IPv4 host is node 0's address and node i's is i
    further on (one machine, a loopback address per node). ValueError when malformed."""
    host, sep, port = template.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{NODE_ADDRESS}={template!r} is not HOST:PORT")
    if INDEX_FIELD in host:
        return host.replace(INDEX_FIELD, str(index)), int(port)
    parts = host.split(".")
    if len(parts) != 4 or not all(p.isdigit() and int(p) < 256 for p in parts):
        raise ValueError(f"{NODE_ADDRESS}={template!r}: the host has no {INDEX_FIELD} and is not an IPv4 address")
    value = int.from_bytes(bytes(int(p) for p in parts), "big") + index
    if value >= 2**32:
        raise ValueError(f"{NODE_ADDRESS}={template!r}: node {index} is past the last IPv4 address")
    return ".".join(str(b) for b in value.to_bytes(4, "big")), int(port)


def rdzv_conf(node_rank: int) -> str:
    return (
        f"is_host={int(node_rank == 0)},last_call_timeout={LAST_CALL_SECONDS},"
        f"keep_alive_interval={KEEP_ALIVE_SECONDS},keep_alive_max_attempt={KEEP_ALIVE_ATTEMPTS}"
    )


# name -> meaning; docs/design.md's table is checked against it.
MEANING: dict[str, str] = {
    MASTER_ADDR: "DNS name of Pod 0 (`J-0.J.NS.svc`); 127.0.0.1 under `ddpjob run`",
    MASTER_PORT: "rendezvous port, `spec.port`; a free port under `ddpjob run`",
    NNODES: "number of Pods in the gang, `spec.nodes`; `MIN:MAX` for an elastic job (torchrun's syntax)",
    NODE_RANK: "this Pod's index, 0..nodes-1 (an elastic job's node ranks are torchrun's rendezvous')",
    NPROC_PER_NODE: "processes in this Pod (resolved `spec.nprocPerNode`)",
    WORLD_SIZE: "nodes x processes per node; not set for an elastic job (torchrun sets it per group)",
    RANK: "global rank; set only when one process runs per Pod (torchrun sets it otherwise)",
    LOCAL_RANK: "0; set only when one process runs per Pod",
    LOCAL_WORLD_SIZE: "1; set only when one process runs per Pod",
    JOB_NAME: "the DDPJob's name",
    JOB_NAMESPACE: "the DDPJob's namespace",
    RESTART_COUNT: "the gang attempt (0, 1, ...): `status.restarts` when the Pods were made",
    BACKEND: "resolved backend: nccl or gloo",
    CHECKPOINT_DIR: "mount path of the checkpoint volume, when `spec.checkpoint` is set",
    PROGRESS_FILE: f"where a process may write the progress record (`{PROGRESS_PATH}`, an emptyDir)",
    PROGRESS_PORT: f"port of ddpjob-launch's /progress and /metrics ({DEFAULT_PROGRESS_PORT}, containerPort "
    f"`{PROGRESS_PORT_NAME}`)",
    RDZV_BACKEND: "elastic jobs only: `c10d`",
    RDZV_ENDPOINT: "elastic jobs only: `MASTER_ADDR:MASTER_PORT`, the c10d store that Pod 0's torchrun hosts",
    RDZV_ID: "elastic jobs only: the job's name",
    RDZV_CONF: f"elastic jobs only: `is_host=1` on Pod 0, `is_host=0` elsewhere; "
    f"`last_call_timeout={LAST_CALL_SECONDS}`, `keep_alive_interval={KEEP_ALIVE_SECONDS}`, "
    f"`keep_alive_max_attempt={KEEP_ALIVE_ATTEMPTS}`",
    MAX_RESTARTS: f"elastic jobs only: {ELASTIC_RESTARTS_PER_NODE} x `elastic.maxNodes`, torchrun's budget "
    "of worker restarts (each lost Pod costs each survivor one)",
    NODE_ADDRESS: "elastic jobs only: `J-{index}.J.NS.svc:spec.port`, where each node's launcher serves its store",
    NOTICE_TOKEN: "elastic jobs only: the key of the operator's notices to this job's Pods (not in `ddpjob render`)",
}

# Defaults, not reserved: a user's `spec.env` entry of the same name replaces them.
# NCCL errors and timeouts become process exits (which the gang restart handles) instead
# of ranks blocked forever in a collective; the trainer passes the collective timeout to
# init_process_group.
NCCL_DEFAULTS: dict[str, str] = {
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",  # abort the communicator and exit on error/timeout
    COLLECTIVE_TIMEOUT: "600",  # torch's own NCCL default; gloo's is 30 minutes
}
# An elastic job's defaults, for torch's elastic agent (torch 2.14). Every Pod runs the same
# number of workers, so ranks are computed rather than exchanged through the store (the
# exchange hung after a lost node); and each group gets a fresh worker store from its own
# rank 0, instead of the shared one whose address a survivor keeps from its first group
# (it pointed at the lost Pod: the new group never met).
ELASTIC_DEFAULTS: dict[str, str] = {
    "TORCH_ELASTIC_WORKER_IDENTICAL": "1",
    "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
}
DEFAULT_MEANING: dict[str, str] = {
    "TORCH_ELASTIC_WORKER_IDENTICAL": "elastic jobs: 1, every Pod runs the same number of workers (ranks computed)",
    "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "elastic jobs: 1, each group's workers get a fresh store from its rank 0",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1: a failed or timed-out NCCL collective aborts and exits the process",
    COLLECTIVE_TIMEOUT: "seconds a collective may block before it fails (init_process_group timeout)",
}

# What users may not set in `spec.env`: the operator and the local runner own these.
RESERVED = (
    frozenset(MEANING)
    | frozenset(TORCHRUN_PREFIX + n for n in NODE_LEVEL)
    | {PROGRESS_HOST, TERMINATION_LOG, TENSORBOARD_DIR}
)


def _elastic(job: Any, master_addr: str, node_rank: int) -> list[tuple[str, str]]:
    # Pod 0's DNS name is J-0.J.NS.svc: every node's is the same with its own index.
    head, _, domain = master_addr.partition(".")
    node_template = f"{head.removesuffix('-0')}-{INDEX_FIELD}.{domain}:{job.port}"
    return [
        (RDZV_BACKEND, "c10d"),
        (RDZV_ENDPOINT, f"{master_addr}:{job.port}"),
        (RDZV_ID, job.name),
        (RDZV_CONF, rdzv_conf(node_rank)),
        (MAX_RESTARTS, str(ELASTIC_RESTARTS_PER_NODE * job.elastic.max_nodes)),
        (NODE_ADDRESS, node_template),
    ]


def _pairs(job: Any, master_addr: str, node_rank: int, restart_count: int) -> list[tuple[str, str]]:
    def both(name: str, value: str) -> list[tuple[str, str]]:
        return [(name, value), (TORCHRUN_PREFIX + name, value)]

    elastic = getattr(job, "elastic", None)
    pairs = [
        *both(MASTER_ADDR, master_addr),
        *both(MASTER_PORT, str(job.port)),
        *both(NNODES, elastic.nnodes if elastic else str(job.nodes)),
        *both(NODE_RANK, str(node_rank)),
        *both(NPROC_PER_NODE, str(job.nproc_per_node)),
    ]
    if elastic:
        # The world's size and each process's rank are the rendezvous' (they change with it).
        pairs += _elastic(job, master_addr, node_rank)
    else:
        pairs.append((WORLD_SIZE, str(job.world_size)))
    if job.nproc_per_node == 1 and not elastic:
        # One process per Pod: a plain init_process_group("env://") script works unchanged.
        pairs += [(RANK, str(node_rank)), (LOCAL_RANK, "0"), (LOCAL_WORLD_SIZE, "1")]
    pairs += [
        (JOB_NAME, job.name),
        (JOB_NAMESPACE, job.namespace),
        (RESTART_COUNT, str(restart_count)),
        (BACKEND, job.backend),
    ]
    if job.checkpoint:
        pairs.append((CHECKPOINT_DIR, job.checkpoint.mount_path))
    pairs += [(PROGRESS_FILE, PROGRESS_PATH), (PROGRESS_PORT, str(DEFAULT_PROGRESS_PORT))]
    # Duplicate env names are ambiguous to readers: leave out a default the user sets.
    user = {e.get("name") for e in getattr(job, "env", ()) or ()}
    pairs += [(k, v) for k, v in NCCL_DEFAULTS.items() if k not in user]
    if elastic:
        pairs += [(k, v) for k, v in ELASTIC_DEFAULTS.items() if k not in user]
    return pairs


def pod_env(job: Any, master_addr: str, node_rank: int, restart_count: int = 0) -> list[dict[str, str]]:
    """The contract as a container's `env`, in a fixed order. `job` is an api.spec.DDPJob."""
    return [{"name": k, "value": v} for k, v in _pairs(job, master_addr, node_rank, restart_count)]


def local_overrides(
    port: int,
    checkpoint_dir: str | None,
    progress_file: str | None = None,
    progress_host: str | None = None,
    termination_log: str | None = None,
    node_zero_host: str | None = None,
) -> dict[str, str]:
    """The values that only make sense in a cluster, pointed at this machine. The progress
    file and the termination log move into the Pod's local directory; `progress_host` is
    the loopback address the Pod's launcher binds (its own "Pod IP"), so every Pod keeps
    the contract port."""
    env = {
        MASTER_ADDR: "127.0.0.1",
        TORCHRUN_PREFIX + MASTER_ADDR: "127.0.0.1",
        MASTER_PORT: str(port),
        TORCHRUN_PREFIX + MASTER_PORT: str(port),
    }
    # An elastic job's c10d endpoint is the same place. (Set for a rigid one too, where
    # torchrun's static rendezvous would read the same address from it.)
    env[RDZV_ENDPOINT] = f"127.0.0.1:{port}"
    if checkpoint_dir is not None:
        env[CHECKPOINT_DIR] = str(checkpoint_dir)
    if progress_file is not None:
        env[PROGRESS_FILE] = str(progress_file)
    if progress_host is not None:
        env[PROGRESS_HOST] = progress_host
    if termination_log is not None:
        env[TERMINATION_LOG] = termination_log
    if node_zero_host is not None:
        # Node i's loopback address is node 0's plus i (node_address), all on this port.
        env[NODE_ADDRESS] = f"{node_zero_host}:{port}"
    return env
