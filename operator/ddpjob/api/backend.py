"""`spec.backend: auto`: which collective backend a job gets, and the one line that says
so when it is not the one a GPU job would expect.

nccl needs a GPU of its own for every process of a node (two ranks on one GPU end in
NCCL's "Duplicate GPU detected"), so `auto` is nccl only when gpusPerNode >= processes
per node. A CPU job (gpusPerNode 0) has only gloo, which `ddpjob validate` prints and
status.backend shows. A GPU job with more processes than GPUs falls back to gloo: that is
said once, by `ddpjob validate`, `render` and `run` (cli/main.py), the operator (a
Normal Event `BackendGloo` when the job starts, job/creation.py) and the trainer
(ddpjob_trainer/backend.py, on the node it runs on). Pure.
"""

from __future__ import annotations

from typing import Protocol


class Resolved(Protocol):
    """What of a parsed job (api/spec.py's DDPJob) the notice reads; a protocol, so that
    spec.py, which resolves the backend here, is not imported back. Read-only members, as
    the job is a frozen dataclass."""

    @property
    def backend_requested(self) -> str: ...
    @property
    def backend(self) -> str: ...
    @property
    def gpus_per_node(self) -> int: ...
    @property
    def nproc_per_node(self) -> int: ...


AUTO = "auto"
NOTICE_REASON = "BackendGloo"


def resolve(requested: str | None, gpus: int | None, nproc: int | None) -> str | None:
    """The backend `requested` (nccl, gloo or auto) means for this many GPUs and processes per node."""
    if requested != AUTO:
        return requested
    return "nccl" if gpus and gpus >= (nproc or 1) else "gloo"


def notice(job: Resolved) -> str | None:
    """One line when `auto` chose gloo for a job that asks for GPUs; None otherwise."""
    if job.backend_requested != AUTO or job.backend != "gloo" or not job.gpus_per_node:
        return None
    return (
        f"spec.backend: auto chose gloo: {job.nproc_per_node} processes per node share "
        f"{job.gpus_per_node} GPU(s), and nccl needs one GPU per process "
        f"(for nccl, set nprocPerNode to at most {job.gpus_per_node})"
    )
