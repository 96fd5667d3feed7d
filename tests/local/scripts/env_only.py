"""A one-process-per-Pod script in the style of older Kubeflow examples: no torchrun,
only init_process_group with env:// (RANK and WORLD_SIZE from the Pod's env)."""

import json
import os
from pathlib import Path

import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://")
try:
    t = torch.ones(1) * (dist.get_rank() + 1)
    dist.all_reduce(t)
    Path(os.environ["DDPJOB_TEST_PROBE_DIR"], f"env-only-rank{dist.get_rank()}.json").write_text(
        json.dumps({"rank": dist.get_rank(), "world": dist.get_world_size(), "sum": t.item()})
    )
finally:
    dist.destroy_process_group()
