"""The optimizer `--optimizer` names, built the fastest way the device allows."""

from __future__ import annotations

import torch


def make_optimizer(args, params, device, capturable: bool = False) -> torch.optim.Optimizer:
    if args.optimizer == "sgd":
        return torch.optim.SGD(params, lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay)
    cls = torch.optim.Adam if args.optimizer == "adam" else torch.optim.AdamW
    # Fused kernels: one launch per step instead of one per parameter tensor; capturable
    # (the step count on the GPU) when the step is replayed as a CUDA graph (graph_step.plan).
    return cls(
        params,
        lr=args.lr,
        weight_decay=args.weight_decay,
        fused=device.type == "cuda" or None,
        capturable=capturable,
    )
