"""DDP for a group that resizes in place: every collective it makes can be ended by a lost
peer (interrupt.py), as TorchFT's DDP does.

DDP makes collectives of its own besides the gradient all-reduce, each blocking the
training thread inside C++ where nothing can end it: at construction (the parameters'
shapes and values), in its second step's forward (the gradient buckets' order, rebuilt
once per DDP) and in every forward of a model with buffers (BatchNorm's running
statistics, from rank 0). A peer frozen inside one of them (paused, hung: nothing closes a
connection) held the survivors for gloo's whole timeout (600 s) instead of the watcher's
3 s probe. So DDP is given a group of this rank alone (`own`), where each of those is a
no-op, and what they did for the group is done here through tracked collectives on the
real one: the initial broadcast of parameters and buffers from rank 0, and the buffers'
broadcast before each forward where DDP would make it; the gradient buckets go through the
tracked communication hook as before.

`find_unused_parameters` and `static_graph` all-reduce which parameters each rank used,
inside DDP's backward, and need the real group there: with either, DDP keeps the real group
and its own collectives untracked (docs/node-failures.md, Known limits).
"""

from __future__ import annotations

import torch
from torch.nn.parallel import DistributedDataParallel as DDP

from . import UsageError
from .collectives import broadcast_tensors
from .interrupt import Interrupts, comm_hook

UNTRACKED = ("find_unused_parameters", "static_graph")  # need DDP's own collectives on the real group


def wrap(module: torch.nn.Module, interrupts: Interrupts, group, own, **ddp_kwargs) -> DDP:
    """DDP of `module` over `group` (the generation's), its collectives tracked; `own` is
    a process group of this rank alone."""
    if ddp_kwargs.get("process_group") is not None or ddp_kwargs.get("device_mesh") is not None:
        raise UsageError("Elastic.wrap: the group is the elastic job's own; leave process_group and device_mesh out")
    if any(ddp_kwargs.get(name) for name in UNTRACKED):
        ddp = DDP(module, process_group=group, **ddp_kwargs)
    else:
        init_sync = ddp_kwargs.pop("init_sync", True)
        ddp = DDP(module, process_group=own, init_sync=False, **ddp_kwargs)
        if init_sync:  # DDP's: rank 0's parameters and buffers (the latter unless broadcast_buffers=False)
            with_buffers = ddp_kwargs.get("broadcast_buffers", True) is not False
            params = [p for n, p in module.named_parameters() if n not in ddp.parameters_to_ignore]
            sync(params + (ddp.modules_buffers if with_buffers else []), group, interrupts)
        ddp.register_forward_pre_hook(_buffer_sync(ddp, group, interrupts))
    ddp.register_comm_hook(None, comm_hook(interrupts, group))
    return ddp


def sync(tensors: list[torch.Tensor], group, interrupts: Interrupts) -> None:
    """Rank 0's values of `tensors` on every rank of `group`, in place."""
    with torch.no_grad():
        broadcast_tensors([t.data for t in tensors], 0, group, interrupts)


def _buffer_sync(ddp: DDP, group, interrupts: Interrupts):
    def hook(_module, _args):
        # DDP's own condition: not under no_sync(), buffers asked for, and some to send.
        if ddp.will_sync_module_buffers():
            sync(ddp.modules_buffers, group, interrupts)

    return hook
