"""Process-group set-up and tear-down, the device and backend, and the few collectives
the trainer needs outside DDP's own gradient all-reduce. In a group that resizes in place
(`Dist.group`, elastic.py) the rank and size are the current generation's, and each
collective waits through its interrupts (a lost peer ends it: collectives.py)."""

from __future__ import annotations

import datetime
import gc
import os
import sys
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from ddpjob import contract

from . import UsageError, backend as backend_choice
from .env import ProcessEnv, threads_per_process


@dataclass
class Dist:
    env: ProcessEnv
    device: torch.device
    backend: str | None  # None: no process group (world size 1)
    control: dist.ProcessGroup | None = None  # a gloo group for CPU-side agreement (stop flag, RNG gather)
    in_place: bool = False  # an elastic job's worker that resizes in place (elastic.py)
    group: Any = None  # its elastic.Elastic, once made

    @property
    def rank(self) -> int:
        return self.group.rank if self.group is not None else self.env.rank

    @property
    def world_size(self) -> int:
        return self.group.world_size if self.group is not None else self.env.world_size

    @property
    def grouped(self) -> bool:
        """Whether collectives run: a process group exists (or will, for one resizing in place)."""
        return self.backend is not None and (
            not self.in_place or (self.group is not None and self.group.gen is not None)
        )

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def pick(env: ProcessEnv) -> tuple[torch.device, str]:
    """The device and backend (`backend.choose`): LOCAL_RANK indexes this node's GPUs."""
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    # A single process has no collectives: its device is all that matters.
    requested = env.backend if env.distributed else None
    choice = backend_choice.choose(requested, env.local_rank, env.local_world_size, gpus)
    if choice.notice and env.local_rank == 0 and env.distributed:
        print(f"ddpjob-train: {choice.notice}", file=sys.stderr, flush=True)
    if choice.device_index is None:
        return torch.device("cpu"), choice.backend
    torch.cuda.set_device(choice.device_index)
    return torch.device("cuda", choice.device_index), choice.backend


def pick_device(env: ProcessEnv) -> torch.device:
    return pick(env)[0]


def set_cpu_threads(env: ProcessEnv) -> None:
    """Share the node's CPUs between its processes. An explicit OMP_NUM_THREADS (set by the
    user, or by ddpjob-launch for torchrun's workers) is respected as is."""
    if "OMP_NUM_THREADS" in os.environ:
        return
    torch.set_num_threads(threads_per_process(env.local_world_size))


def collective_timeout(environ=None) -> datetime.timedelta | None:
    """DDPJOB_COLLECTIVE_TIMEOUT_SECONDS (set by the contract, overridable in spec.env): how
    long a collective may block before it fails, so a dead peer ends in an exit, not a hang."""
    raw = (os.environ if environ is None else environ).get(contract.COLLECTIVE_TIMEOUT)
    if not raw:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds <= 7 * 86400:
        raise UsageError(f"environment variable {contract.COLLECTIVE_TIMEOUT}={raw!r} must be seconds in (0, 604800]")
    return datetime.timedelta(seconds=seconds)


def setup(env: ProcessEnv) -> Dist:
    set_cpu_threads(env)
    if not env.distributed:
        return Dist(env, pick_device(env), None)
    device, backend = pick(env)
    timeout = collective_timeout()  # None: torch's default
    # env://, as set by torchrun; a GPU named at once lets nccl bind to it eagerly.
    dist.init_process_group(backend=backend, timeout=timeout, device_id=device if device.type == "cuda" else None)
    # Control messages (stop vote, RNG gather) are CPU tensors on a gloo group of their
    # own: with nccl they would need a GPU sync, and on the training group they would
    # queue behind or between DDP's gradient buckets.
    control = dist.new_group(backend="gloo", timeout=timeout)
    if not isinstance(control, dist.ProcessGroup):  # a non-member's marker: every rank is in a group of all
        raise RuntimeError(f"rank {env.rank} is not a member of the control group of all ranks")
    return Dist(env, device, backend, control)


def setup_in_place(env: ProcessEnv) -> Dist:
    """An elastic job's worker that resizes in place: the device and backend now, the group
    when it joins one (elastic.Elastic.join); torchrun's RANK and WORLD_SIZE are this
    node's only."""
    set_cpu_threads(env)
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    choice = backend_choice.choose(env.backend, env.local_rank, env.local_world_size, gpus)
    if choice.device_index is None:
        return Dist(env, torch.device("cpu"), choice.backend, in_place=True)
    torch.cuda.set_device(choice.device_index)
    return Dist(env, torch.device("cuda", choice.device_index), choice.backend, in_place=True)


def _wait(d: Dist, work) -> None:
    if d.group is not None:
        d.group.wait(work)
    else:
        work.wait()


def teardown() -> None:
    """After the trainer has let go of its model. torch.compile's code cache still holds
    the compiled DDP, whose reducer holds the process group's backend and its last
    collective: freed only at interpreter shutdown, gloo's threads then abort the process
    (SIGABRT, "terminate called without an active exception") after a finished run, in
    about half of 2-rank runs of a compiled DDP here. So it is freed now, while Python runs."""
    torch.compiler.reset()
    gc.collect()
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def peak_memory(device: torch.device) -> dict:
    """This process's peak GPU memory so far, for each epoch's metrics (what a configuration
    needs, to compare batch sizes and AMP modes); nothing on a CPU."""
    if device.type != "cuda":
        return {}
    return {"peak_gpu_mib": round(torch.cuda.max_memory_allocated(device) / 2**20, 1)}


def all_reduce_sum(d: Dist, values: torch.Tensor) -> torch.Tensor:
    """Sum a small tensor of metrics over all ranks (on the training device)."""
    if d.grouped:
        _wait(d, dist.all_reduce(values, op=dist.ReduceOp.SUM, async_op=True))
    return values


def any_rank(d: Dist, flag: bool) -> bool:
    """True on every rank when it is true on at least one: how ranks agree to stop."""
    if not d.grouped:
        return flag
    t = torch.tensor([1 if flag else 0], dtype=torch.int32)
    _wait(d, dist.all_reduce(t, op=dist.ReduceOp.MAX, group=d.control, async_op=True))
    return bool(t.item())


def broadcast_object(d: Dist, obj):
    if not d.grouped:
        return obj
    if d.group is not None:
        from .collectives import broadcast_object as interruptible

        return interruptible(obj, 0, d.rank, d.control, d.group.interrupts)
    box = [obj]
    dist.broadcast_object_list(box, src=0, group=d.control)
    return box[0]


def gather_objects(d: Dist, obj) -> list:
    """Every rank's `obj`, in rank order (used for per-rank RNG states)."""
    if not d.grouped:
        return [obj]
    if d.group is not None:
        from .collectives import all_gather_object

        return all_gather_object(obj, d.world_size, d.control, d.group.interrupts)
    out = [None] * d.world_size
    dist.all_gather_object(out, obj, group=d.control)
    return out


class StopVote:
    """An all-reduce(MAX) of "I was asked to stop", started before a step and read after
    it, so the network round trip overlaps the step's compute. All ranks read the same
    result after the same step: they stop together, nobody hangs in the next collective."""

    def __init__(self, d: Dist):
        self.d, self.flag, self.local = d, torch.zeros(1, dtype=torch.int32), False
        self.work: dist.Work | None = None  # the vote in flight

    def start(self, flag: bool) -> None:
        self.local = flag
        if self.d.backend is not None:
            self.flag.fill_(int(flag))
            self.work = dist.all_reduce(self.flag, op=dist.ReduceOp.MAX, group=self.d.control, async_op=True)

    def result(self) -> bool:
        if self.work is None:
            return self.local
        self.work.wait()
        self.work = None
        return bool(self.flag.item())
