"""Test workload: records the rendezvous env each process saw and the result of one
all-reduce, then optionally dies once (to exercise gang restarts)."""

import json
import os
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

out = Path(os.environ["DDPJOB_TEST_PROBE_DIR"])
dist.init_process_group("gloo")  # env:// from MASTER_ADDR/PORT, RANK, WORLD_SIZE
try:
    rank, world = dist.get_rank(), dist.get_world_size()
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)
    attempt = os.environ.get("DDPJOB_RESTART_COUNT", "?")
    record: dict[str, Any] = {
        k: os.environ.get(k)
        for k in (
            "RANK",
            "LOCAL_RANK",
            "WORLD_SIZE",
            "LOCAL_WORLD_SIZE",
            "MASTER_ADDR",
            "MASTER_PORT",
            "NODE_RANK",
            "NNODES",
            "NPROC_PER_NODE",
            "DDPJOB_NAME",
            "DDPJOB_RESTART_COUNT",
            "DDPJOB_BACKEND",
        )
    }
    record.update(rank=rank, world=world, allreduce=value.item(), t=time.time())
    (out / f"rank{rank}-attempt{attempt}.json").write_text(json.dumps(record))
    crash = os.environ.get("DDPJOB_TEST_PROBE_CRASH_RANK")
    if crash is not None and int(crash) == rank and attempt == "0":
        os._exit(int(os.environ.get("DDPJOB_TEST_PROBE_CRASH_CODE", "137")))
    dist.barrier()
finally:
    if dist.is_initialized():
        dist.destroy_process_group()
