"""`--cuda-graph`: the whole optimizer step (forward, loss, backward, the running metric
sums and the optimizer's update) captured once as a CUDA graph and replayed for every
full batch. On one GPU a small model's eager step is bound by kernel launches, not by
the GPU: replaying launches the whole step at once (the figures are in
docs/benchmarks.md, "On a GPU").

It follows torch's whole-network capture recipe (the CUDA graphs notes): a few eager
warm-up steps on a side stream, so lazy state (the optimizer's moments, cuBLAS
workspaces) exists before capture; gradients set to None before capture, so the graph
allocates and then overwrites them; an optimizer built with `capturable=True`, whose
step count lives on the GPU. The warm-up steps and a last partial batch are real
training steps, run eagerly through the same MicroStep the graph captured.
"""

from __future__ import annotations

import torch

from .micro_step import MicroStep

WARMUP_STEPS = 3
# Optimizers whose update torch can capture (`capturable=True`): all state on the GPU.
CAPTURABLE = ("adam", "adamw")


def refusal(args, device: torch.device, world_size: int, elastic: bool) -> str | None:
    """Why this run cannot capture its step, in one line naming the flag; None when it can."""
    if device.type != "cuda":
        return f"--cuda-graph needs a CUDA device (this process has {device})"
    if world_size > 1:
        return (
            f"--cuda-graph captures one process's step, and WORLD_SIZE={world_size}: "
            "DDP's all-reduce is not captured (run one process, or drop --cuda-graph)"
        )
    if elastic:
        return "--cuda-graph needs a fixed batch, and an elastic job's share of each global batch changes"
    if args.grad_accum != 1:
        return "--cuda-graph captures one optimizer step per batch: --grad-accum must be 1"
    if args.amp == "fp16":
        return "--cuda-graph with --amp fp16: the GradScaler reads its inf check on the host each step; use bf16"
    if args.optimizer not in CAPTURABLE:
        return f"--cuda-graph needs a capturable optimizer ({', '.join(CAPTURABLE)}), not --optimizer {args.optimizer}"
    if args.compile:
        return (
            "--cuda-graph and --compile: pick one (torch.compile captures CUDA graphs itself in reduce-overhead mode)"
        )
    if args.strategy == "dp":
        return "--cuda-graph and --strategy dp: DataParallel's threads cannot be captured"
    return None


class CapturedStep:
    """Call it with each batch: eager for the warm-up and for a batch of another shape,
    a replay of the captured step otherwise."""

    def __init__(self, micro: MicroStep, optimizer: torch.optim.Optimizer, warmup: int = WARMUP_STEPS):
        self.micro, self.optimizer, self.warmup = micro, optimizer, warmup
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static: tuple[torch.Tensor, torch.Tensor] | None = None
        self.replays = 0

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        if self.graph is None and self.warmup > 0:
            self.warmup -= 1
            self._on_side_stream(x, y)
        elif self.graph is None:
            self._capture(x, y)
            self._replay(x, y)
        elif self.static is not None and x.shape == self.static[0].shape and y.shape == self.static[1].shape:
            self._replay(x, y)
        else:
            # Another shape (the epoch's last, partial batch): eager, into the graph's own
            # gradient tensors, which must stay where the graph writes them.
            self.optimizer.zero_grad(set_to_none=False)
            self.micro(x, y)
            self.optimizer.step()

    def _on_side_stream(self, x: torch.Tensor, y: torch.Tensor) -> None:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self.micro(x, y)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        torch.cuda.current_stream().wait_stream(side)

    def _capture(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.static = (x.clone(), y.clone())
        self.optimizer.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.micro(*self.static)
            self.optimizer.step()
        self.graph = graph

    def _replay(self, x: torch.Tensor, y: torch.Tensor) -> None:
        assert self.graph is not None and self.static is not None
        self.static[0].copy_(x, non_blocking=True)
        self.static[1].copy_(y, non_blocking=True)
        self.graph.replay()
        self.replays += 1
