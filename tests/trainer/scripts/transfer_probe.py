"""Test workload, one gloo rank of two (separate processes meeting through a file): rank 0
has trained a step (a model and Adam's state), rank 1 is a newcomer with neither; rank 0's
state goes to rank 1 through collectives.broadcast_state, then every rank's interrupts
are tripped while rank 1 waits on a broadcast rank 0 never sends (a lost peer). Each rank
writes, as JSON, what it holds and how the blocked wait ended.

    transfer_probe.py RANK RENDEZVOUS_FILE OUT_PREFIX"""

import json
import os
import sys
import threading
import time

import torch
import torch.distributed as dist
from torch import nn

from ddpjob_trainer.collectives import all_gather_object, broadcast_state
from ddpjob_trainer.interrupt import GroupLost, Interrupts


def rank_main(rank: int, out: str) -> None:
    torch.manual_seed(rank)  # different weights: only the transfer can make them equal
    model = nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    if rank == 0:
        model(torch.ones(4, 3)).sum().backward()
        opt.step()
    control = dist.new_group(backend="gloo")
    ir = Interrupts()
    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "pos": [1, 2, 3]} if rank == 0 else None
    got = broadcast_state(state, 0, rank, dist.group.WORLD, control, torch.device("cpu"), ir)
    assert got is not None  # every rank gets the state
    if rank == 1:
        model.load_state_dict(got["model"])
        opt.load_state_dict(got["optimizer"])
    names = all_gather_object(f"rank{rank}", 2, control, ir)
    result = {
        "weight": model.weight.tolist(),
        "exp_avg": opt.state_dict()["state"][0]["exp_avg"].tolist(),
        "pos": got["pos"],
        "names": names,
    }
    dist.barrier()
    if rank == 1:  # rank 0 never sends: only the trip ends this wait
        threading.Timer(0.5, ir.trip, ("peer lost", 0)).start()
        t0 = time.monotonic()
        try:
            ir.wait(dist.broadcast(torch.zeros(1), src=0, async_op=True))
            result["ended"] = "completed"
        except GroupLost as e:
            result["ended"], result["waited"] = str(e), time.monotonic() - t0
    with open(f"{out}{rank}.json", "w") as f:
        json.dump(result, f)
    if rank == 0:  # alive (its sockets open) until rank 1's wait has ended: silent, not gone
        deadline = time.monotonic() + 120
        while not os.path.exists(f"{out}1.json") and time.monotonic() < deadline:
            time.sleep(0.1)


if __name__ == "__main__":
    dist.init_process_group("gloo", init_method=f"file://{sys.argv[2]}", rank=int(sys.argv[1]), world_size=2)
    rank_main(int(sys.argv[1]), sys.argv[3])
    sys.stdout.flush()
    os._exit(0)  # rank 1's abandoned broadcast: do not wait for the group's timeout at exit
