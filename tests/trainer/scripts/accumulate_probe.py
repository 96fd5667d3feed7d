"""Test workload: two gloo ranks run a micro-step that does not end its optimizer step
(MicroStep.accumulating(False)) and then one that does, with the model as the trainer
wraps it, plain DDP or DDP inside a `--compile` choice; prints, as JSON, whether the
ranks' gradients differed after each (kept local) or agreed (all-reduced)."""

import json
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from ddpjob_trainer.compile_choice import CompileChoice
from ddpjob_trainer.micro_step import MicroStep


def same_across_ranks(t: torch.Tensor) -> bool:
    gathered = [torch.zeros_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, t)
    return all(torch.equal(gathered[0], g) for g in gathered[1:])


def rank_main(rank: int, port: int, mode: str, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        torch.manual_seed(0)
        ddp = DDP(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)))
        model = ddp if mode == "ddp" else CompileChoice(ddp, torch.compile(ddp, dynamic=False),
                                                        torch.device("cpu"), 2, print)
        micro = MicroStep(model, torch.amp.GradScaler("cpu", enabled=False), None, torch.device("cpu"), 2, 2)
        seen = []
        for sync in (False, True):
            x = torch.full((5, 4), float(rank + 1) * (2.0 if sync else 1.0))
            with micro.accumulating(sync):
                micro(x, torch.tensor([0, 1, 2, 0, 1]))
            seen.append(same_across_ranks(ddp.module[0].weight.grad.clone()))
        if rank == 0:
            with open(out, "w") as f:
                json.dump({"after_local_micro_step": seen[0], "after_last_micro_step": seen[1]}, f)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    mp.spawn(rank_main, args=(free, sys.argv[1], sys.argv[2]), nprocs=2)
