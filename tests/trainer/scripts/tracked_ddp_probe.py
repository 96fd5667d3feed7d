"""Test workload, one gloo rank of two (separate processes meeting through a file), for
tracked_ddp.wrap.

    tracked_ddp_probe.py RANK RENDEZVOUS_FILE OUT_PREFIX CASE

CASE `same`: each rank starts from different weights and trains 3 steps of a BatchNorm CNN
twice, through torch's DDP and through tracked_ddp.wrap; it writes both results.
CASE `freeze-wrap` / `freeze-step2`: rank 1 stops itself (SIGSTOP, a frozen peer: its
sockets stay open, nothing answers) before the wrap or before the second step's forward;
rank 0's interrupts are tripped 1 s later, as the watcher's probe would, and it writes how
its wrap or step ended. The group's timeout is 60 s: a wait that only the timeout ends
comes back as gloo's error, not GroupLost."""

import datetime
import json
import os
import signal
import sys
import threading

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from ddpjob_trainer import tracked_ddp
from ddpjob_trainer.interrupt import Interrupts
from ddpjob_trainer.models import cnn, mlp

STEPS = 3


def batches(rank: int):
    g = torch.Generator().manual_seed(100 + rank)
    return [(torch.randn(8, 1, 12, 12, generator=g), torch.randint(0, 10, (8,), generator=g)) for _ in range(STEPS)]


def train(rank: int, wrap) -> dict:
    torch.manual_seed(rank)  # different weights: only the wrap's sync makes them equal
    model = cnn(1, 10)
    ddp = wrap(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in batches(rank):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
    return {k: v.tolist() for k, v in model.state_dict().items()}


def freeze(rank: int, at: str, own) -> dict:
    torch.manual_seed(rank)
    model = mlp(144, 10)  # no buffers: the second step's wait is DDP's bucket rebuild alone
    interrupts = Interrupts()
    x, y = batches(rank)[0]
    if rank == 1:
        if at == "wrap":
            os.kill(os.getpid(), signal.SIGSTOP)
        ddp = tracked_ddp.wrap(model, interrupts, dist.group.WORLD, own)
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        dist.barrier()
        os.kill(os.getpid(), signal.SIGSTOP)
        return {}
    try:
        if at == "wrap":
            threading.Timer(1.0, interrupts.trip, ("peer frozen",)).start()
        ddp = tracked_ddp.wrap(model, interrupts, dist.group.WORLD, own)
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        dist.barrier()  # rank 1 has done its first step (and stopped after it)
        threading.Timer(1.0, interrupts.trip, ("peer frozen",)).start()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        return {"ended": "completed"}
    except RuntimeError as exc:  # GroupLost, or from backward the reducer's words around the trip's
        # reason; gloo's timeout for a collective nothing tracks
        return {"ended": type(exc).__name__, "why": str(exc)[:300]}


if __name__ == "__main__":
    rank, case = int(sys.argv[1]), sys.argv[4]
    dist.init_process_group(
        "gloo", init_method=f"file://{sys.argv[2]}", rank=rank, world_size=2, timeout=datetime.timedelta(seconds=60)
    )
    own = dist.new_group([rank], backend="gloo", use_local_synchronization=True)
    if case == "same":
        result = {
            "torch": train(rank, lambda m: DDP(m)),
            "tracked": train(rank, lambda m: tracked_ddp.wrap(m, Interrupts(), dist.group.WORLD, own)),
        }
    else:
        result = freeze(rank, case.removeprefix("freeze-"), own)
    with open(f"{sys.argv[3]}{rank}.json", "w") as f:
        json.dump(result, f)
    sys.stdout.flush()
    os._exit(0)  # an abandoned collective: do not wait for the group's timeout at exit
