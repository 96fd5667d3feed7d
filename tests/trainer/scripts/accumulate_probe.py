"""Test workload, one gloo rank of two (separate processes, as the launcher starts the
trainer's; they meet through a file, not a port): a micro-step that does not end its
optimizer step (MicroStep.accumulating(False)), then one that does, with the model as
the trainer wraps it, plain DDP or DDP inside a `--compile` choice; rank 0 writes, as
JSON, whether the ranks' gradients agreed after each (all-reduced) or not (kept local).

    accumulate_probe.py RANK RENDEZVOUS_FILE ddp|compiled OUT"""

import json
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from ddpjob_trainer import distributed
from ddpjob_trainer.compile_choice import CompileChoice, compile_model
from ddpjob_trainer.micro_step import MicroStep


def same_across_ranks(t: torch.Tensor) -> bool:
    gathered = [torch.zeros_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, t)
    return all(torch.equal(gathered[0], g) for g in gathered[1:])


def rank_main(rank: int, mode: str, out: str) -> None:
    torch.manual_seed(0)
    ddp = DDP(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)))
    model = ddp if mode == "ddp" else CompileChoice(ddp, compile_model(ddp), torch.device("cpu"), 2, print)
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


if __name__ == "__main__":
    dist.init_process_group("gloo", init_method=f"file://{sys.argv[2]}", rank=int(sys.argv[1]), world_size=2)
    try:
        rank_main(int(sys.argv[1]), sys.argv[3], sys.argv[4])
    finally:
        distributed.teardown()  # as the trainer ends: the model released before the group
