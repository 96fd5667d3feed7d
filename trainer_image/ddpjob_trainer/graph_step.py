"""The step captured as one CUDA graph: the whole optimizer step (forward, loss, backward,
the running metric sums and the optimizer's update) captured once and replayed for every
full batch. On one GPU a small model's eager step is bound by kernel launches, not by the
GPU: replaying launches the whole step at once (the figures are in docs/benchmarks.md,
"On a GPU"). So it is the default wherever it is eligible (`plan`): one process on a
CUDA device, a fixed batch, one micro-batch per step, bf16 or fp32, Adam or AdamW, no
`--compile`, no DataParallel. Elsewhere the step runs eagerly and the run says why in one
line; `--cuda-graph` insists (what it cannot capture is refused before training) and
`--no-cuda-graph` runs eagerly.

Under DDP (several processes) the all-reduce stays eager: torch can capture it (NCCL >=
2.9.6) only with NCCL's async error handling off, DDP built on a side stream and eleven
eager warm-up steps (torch's CUDA graphs notes, "Usage with DistributedDataParallel"), and
the launcher keeps that error handling on (TORCH_NCCL_ASYNC_ERROR_HANDLING=1) so that a
hung peer ends the collective instead of the job. What torch allows beside it is kept by
default: the model's forward and backward captured, the rest eager (graphed_model.py).

It follows torch's whole-network capture recipe (the CUDA graphs notes): a few eager
warm-up steps on a side stream, so lazy state (the optimizer's moments, cuBLAS
workspaces) exists before capture; gradients set to None before capture, so the graph
allocates and then overwrites them; an optimizer built with `capturable=True`, whose
step count lives on the GPU. The warm-up steps and a last partial batch are real
training steps, run eagerly through the same MicroStep the graph captured. A capture
that fails by default (not asked for) is said in one line and the run goes on eagerly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from . import UsageError
from .micro_step import MicroStep

WARMUP_STEPS = 3
# Optimizers whose update torch can capture (`capturable=True`): all state on the GPU.
CAPTURABLE = ("adam", "adamw")


def ineligible(args, device_type: str, world_size: int, elastic: bool) -> str | None:
    """Why this run's step cannot be captured, in a few words naming the setting; None
    when it can. Pure: the arguments are all it reads."""
    if device_type != "cuda":
        return f"a CUDA graph needs a CUDA device (this process has {device_type})"
    if world_size > 1:
        return (
            f"DDP's all-reduce (WORLD_SIZE={world_size}) is captured only with NCCL's async error handling off, "
            "which the launcher keeps on to end a hung collective"
        )
    if elastic:
        return "an elastic job's share of each global batch changes size, and a graph replays one shape"
    if args.grad_accum != 1:
        return f"--grad-accum {args.grad_accum}: a graph captures one optimizer step per batch"
    if args.amp == "fp16":
        return "--amp fp16: the GradScaler reads its inf check on the host each step (bf16 needs no scaler)"
    if args.optimizer not in CAPTURABLE:
        return f"--optimizer {args.optimizer}: only {' and '.join(CAPTURABLE)} are built capturable"
    if args.compile:
        return "--compile: torch.compile captures CUDA graphs itself (its reduce-overhead mode)"
    if args.strategy == "dp":
        return "--strategy dp: DataParallel's threads cannot be captured"
    return None


@dataclass(frozen=True)
class Plan:
    capture: bool  # the whole step, one process (CapturedStep)
    line: str | None  # what the run says about its step, once; None: nothing to say (no GPU)
    partial: bool = False  # under DDP: the model's forward and backward (graphed_model.py)


def plan(args, device_type: str, world_size: int, elastic: bool) -> Plan:
    """Whether this run captures its step: `args.cuda_graph` True (asked: refused in one
    line when it cannot), False (not), None (the default: wherever it is eligible)."""
    why = ineligible(args, device_type, world_size, elastic)
    if args.cuda_graph:
        if why is not None:
            raise UsageError(f"--cuda-graph: {why} (drop --cuda-graph to run the step eagerly)")
        return Plan(True, "step: captured as one CUDA graph and replayed (--cuda-graph)")
    if device_type != "cuda":
        return Plan(False, None)  # no graphs to fall back from
    if args.cuda_graph is False:
        return Plan(False, "step: eager (--no-cuda-graph)")
    if world_size > 1 and ineligible(args, device_type, 1, elastic) is None and not args.sync_bn:
        return Plan(
            False,
            "step: the model's forward and backward captured as CUDA graphs, the rest eager, by default under DDP: "
            f"{why} (--no-cuda-graph: all eager)",
            partial=True,
        )
    if why is not None:
        return Plan(False, f"step: eager, not captured as a CUDA graph: {why}")
    return Plan(True, "step: captured as one CUDA graph and replayed, the default on one GPU (--no-cuda-graph: eager)")


class CapturedStep:
    """Call it with each batch: eager for the warm-up and for a batch of another shape,
    a replay of the captured step otherwise. `fallback`: where a failed capture is said
    before the run goes on eagerly (the default); None: the failure is raised (asked for)."""

    def __init__(
        self,
        micro: MicroStep,
        optimizer: torch.optim.Optimizer,
        warmup: int = WARMUP_STEPS,
        fallback: Callable[[str], None] | None = None,
    ):
        self.micro, self.optimizer, self.warmup, self.fallback = micro, optimizer, warmup, fallback
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static: tuple[torch.Tensor, torch.Tensor] | None = None
        self.replays = 0
        self.eager = False  # a capture failed: every step runs eagerly

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        if self.eager:
            self.micro(x, y)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        elif self.graph is None and self.warmup > 0:
            self.warmup -= 1
            self._on_side_stream(x, y)
        elif self.graph is None:
            if self._capture(x, y):
                self._replay(x, y)
            else:
                self(x, y)
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

    def _capture(self, x: torch.Tensor, y: torch.Tensor) -> bool:
        """Capture the step; False when it failed and the run goes on eagerly."""
        self.static = (x.clone(), y.clone())
        self.optimizer.zero_grad(set_to_none=True)
        # The graph allocates from a pool of its own: hand the warm-up's cached blocks back
        # first, so that a batch sized to fill the GPU (--batch-size auto) still fits.
        torch.cuda.empty_cache()
        try:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self.micro(*self.static)
                self.optimizer.step()
        except Exception as exc:  # said and run eagerly, or raised when asked for
            if self.fallback is None:
                raise
            self.static, self.eager = None, True
            self.optimizer.zero_grad(set_to_none=True)
            reason = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:200]}"
            self.fallback(f"step: eager from here on, its capture as a CUDA graph failed ({reason})")
            return False
        self.graph = graph
        return True

    def _replay(self, x: torch.Tensor, y: torch.Tensor) -> None:
        assert self.graph is not None and self.static is not None
        self.static[0].copy_(x, non_blocking=True)
        self.static[1].copy_(y, non_blocking=True)
        self.graph.replay()
        self.replays += 1
