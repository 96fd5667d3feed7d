"""One micro-batch of training, written once: forward, loss, backward, and the running
loss and accuracy sums, all on the device and with no host sync (no `.item()`, no
Python branch on a tensor). The eager loop calls it, and `--cuda-graph` (graph_step.py)
captures the very same call with the optimizer step, so what the CPU tests exercise is
what a GPU replays.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from .compile_choice import CompileChoice


class MicroStep:
    """`model` is what the loop trains through (the DDP or compiled wrapper, once made)."""

    def __init__(
        self,
        model: nn.Module,
        scaler: torch.amp.GradScaler,
        amp: torch.dtype | None,
        device: torch.device,
        grad_accum: int,
        world_size: int,
        graph_safe: bool = False,
    ):
        self.model, self.scaler, self.amp, self.device = model, scaler, amp, device
        self.grad_accum, self.world_size = grad_accum, world_size
        # Autocast's cast cache holds tensors made during one forward; a captured graph
        # must not keep them from one replay to the next (torch's CUDA graphs notes).
        self.cache = not graph_safe
        # Loss sum and correct count of the samples since the last progress line. One
        # tensor for the whole run: a captured graph adds into this very memory.
        self.window = torch.zeros(2, device=device)

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.amp is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.amp, cache_enabled=self.cache)

    def accumulating(self, sync: bool) -> contextlib.AbstractContextManager:
        """A micro-batch that does not end its optimizer step keeps its gradients local
        (DDP's no_sync), also under `--compile`, where the DDP is inside the choice: the
        compiled DDP honours the flag, which DDP's forward reads outside the graph."""
        ddp = self.model.eager if isinstance(self.model, CompileChoice) else self.model
        return ddp.no_sync() if not sync and isinstance(ddp, DDP) else contextlib.nullcontext()

    def __call__(self, x: torch.Tensor, y: torch.Tensor, total: int | None = None) -> None:
        """`total`: an elastic job's samples in the whole global micro-batch (elastic_data.py)."""
        with self.autocast():
            out = self.model(x)
            loss = self.loss(out, y, total)
        self.scaler.scale(loss / self.grad_accum).backward()
        with torch.no_grad():
            loss_sum = loss.detach().float() * (total / self.world_size if total is not None else len(y))
            self.window += torch.stack([loss_sum, (out.argmax(1) == y).sum().float()])

    def loss(self, out: torch.Tensor, y: torch.Tensor, total: int | None) -> torch.Tensor:
        if total is None:
            return F.cross_entropy(out, y)
        # Elastic: the mean over the whole global micro-batch, however it is split (DDP
        # averages the ranks' gradients, hence x world size).
        return F.cross_entropy(out, y, reduction="sum") * (self.world_size / total)
