"""Evaluation, sharded: each rank scores its own disjoint shard and the sums are
all-reduced, so the numbers are exact over the whole evaluation set."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import distributed


@torch.no_grad()
def evaluate(model: torch.nn.Module, batches, d: distributed.Dist, autocast) -> dict:
    """`model` unwrapped (no DDP): the shards may differ in size."""
    if batches is None:
        return {}
    model.eval()
    totals = torch.zeros(3, device=d.device)
    for x, y in batches.epoch(0):
        with autocast():
            out = model(x)
        totals += torch.stack(
            [
                F.cross_entropy(out.float(), y, reduction="sum"),
                (out.argmax(1) == y).sum().float(),
                torch.tensor(float(len(y)), device=x.device),
            ]
        )
    model.train()
    loss_sum, correct, count = distributed.all_reduce_sum(d, totals).tolist()
    return {"eval_loss": round(loss_sum / max(count, 1), 6), "eval_accuracy": round(correct / max(count, 1), 6)}
