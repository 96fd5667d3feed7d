"""Which collective backend and which device each process uses.

nccl needs a GPU of its own for every process of a node (two ranks on one GPU end in
NCCL's "Duplicate GPU detected"). So `auto` picks nccl only when every local process
gets its own GPU; with fewer GPUs than processes it picks gloo, each process still on a
GPU (shared, `local_rank % gpus`), and says so in one line. An explicit nccl with too few
GPUs is refused in one line, by the launcher before any process starts and by the
trainer. Pure: the GPU count is an argument.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import UsageError


@dataclass(frozen=True)
class Choice:
    backend: str
    device_index: int | None  # None: CPU
    notice: str | None = None  # one line to print (by local rank 0), or None


def refuse_short_nccl(processes: int, gpus: int) -> None:
    if gpus < processes:
        raise UsageError(
            f"DDPJOB_BACKEND=nccl needs one GPU per process: {processes} process(es) on this node, "
            f"{gpus} GPU(s) visible (use backend auto or gloo, or fewer processes per node)"
        )


def choose(requested: str | None, local_rank: int, local_world: int, gpus: int) -> Choice:
    """requested: nccl, gloo, mpi, xccl, or None for auto."""
    device = local_rank % gpus if gpus > 0 else None
    if requested == "nccl":
        refuse_short_nccl(local_world, gpus)
        return Choice("nccl", local_rank)
    if requested is not None:
        return Choice(requested, device)
    if gpus == 0:
        return Choice("gloo", None)
    if gpus >= local_world:
        return Choice("nccl", local_rank)
    return Choice(
        "gloo",
        device,
        f"{local_world} processes share {gpus} GPU(s) on this node: using gloo (nccl needs one GPU per process)",
    )
