"""`--compile` that is never slower than eager: the compiled model is timed against the
eager one on the run's own steps, and the faster is kept.

torch.compile's gain depends on the model, the batch and the GPU, and it can lose: a
small launch-bound model can pay more in guards and autograd wrappers than fusion saves
(measured on one H100 for the 784-512-256-10 MLP at batch 64: 27,671 samples/s compiled,
45,582 eager). Nobody can tell in advance, so the run measures. After the compiled
model's warm-up (compilation, a recompile for a new shape), the two models take turns in
blocks of BLOCK_STEPS optimizer steps, and each block is timed from its first forward to
the next block's, with the device synchronized at those two points only. A step timed on
its own, synchronized before and after, is the wrong figure: it adds the GPU's tail to
the host's launch time, which favours the model with fewer kernels, while a training run
overlaps the two and is bound by the slower of them (on one H200 such a choice kept a
compiled MLP that trained at 0.86-0.92x eager). A block runs as training runs. The
medians of the blocks' time per step, summed over the ranks so that every rank keeps the
same model, decide; the compiled model is kept only when it is faster by more than
MARGIN (closer than that the two are the same within noise, and eager never recompiles).
Both share the same parameters, so every trial step is a real training step, and after
the trial nothing is synchronized any more.

Shapes stay static (`dynamic=False`): a run has one batch shape and an epoch's last,
partial batch, and once torch marks the batch dimension dynamic every step pays for it.
A block with a step of another shape (the partial batch, and its recompile) is no sample.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import torch
from torch import nn

WARMUP_STEPS = 3  # compiled steps before timing: compilation, autotuning
BLOCK_STEPS = 8  # optimizer steps in a row of one model, timed together
TRIAL_BLOCKS = 4  # timed blocks of each model: 2 x 4 x 8 = 64 trial steps
MARGIN = 0.02  # the compiled model must be this much faster (a fraction of eager's time)


def compile_model(model: nn.Module) -> nn.Module:
    # torch.compile of a Module returns an OptimizedModule, a Module; its stub says Callable.
    return cast(nn.Module, torch.compile(model, dynamic=False))


@dataclass
class _Block:
    name: str  # "compiled" or "eager"
    started: float
    shape: torch.Size
    steps: int = 1
    same_shape: bool = True


class CompileChoice(nn.Module):
    """Called as the model; `chosen` is "compiled" or "eager" once the trial is over."""

    def __init__(
        self,
        eager: nn.Module,
        compiled: nn.Module,
        device: torch.device,
        grad_accum: int,
        say: Callable[[str], None],
        agree: Callable[[torch.Tensor], torch.Tensor] = lambda t: t,
        warmup: int = WARMUP_STEPS,
        block: int = BLOCK_STEPS,
        blocks: int = TRIAL_BLOCKS,
        clock: Callable[[], float] = time.perf_counter,
        synchronize: Callable[[], None] | None = None,
    ):
        """`agree`: a sum over the ranks (every rank reaches the decision at the same step).
        `clock` and `synchronize` (the host's time, and waiting for the device's queued
        work): the tests' own, to model a device that runs behind the host."""
        super().__init__()
        self.eager, self.compiled = eager, compiled
        self.device, self.grad_accum, self.say, self.agree = device, grad_accum, say, agree
        self.warmup, self.block, self.blocks, self.clock = warmup, block, blocks, clock
        cuda = device.type == "cuda"
        self.synchronize = synchronize or ((lambda: torch.cuda.synchronize(device)) if cuda else lambda: None)
        self.times: dict[str, list[float]] = {"compiled": [], "eager": []}  # seconds per step, per block
        self.chosen: str | None = None
        self.calls = 0
        self.running: _Block | None = None  # the block being timed

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.chosen is not None:
            return self.compiled(x) if self.chosen == "compiled" else self.eager(x)
        step, first = divmod(self.calls, self.grad_accum)
        self.calls += 1
        if first == 0 and step >= self.warmup:  # an optimizer step of the trial begins
            self._step(step - self.warmup, x.shape)
            if self.chosen is not None:
                return self.forward(x)
        name = self.running.name if self.running else "compiled"
        return self.compiled(x) if name == "compiled" else self.eager(x)

    def _step(self, k: int, shape: torch.Size) -> None:
        """The k-th trial step begins: a block goes on, or ends and the next one starts."""
        if self.running is not None and k % self.block != 0:
            self.running.steps += 1
            self.running.same_shape &= shape == self.running.shape
            return
        now = self._now()
        if self.running is not None:
            done = self.running
            if done.same_shape:
                self.times[done.name].append((now - done.started) / done.steps)
            if min(len(t) for t in self.times.values()) >= self.blocks:
                self._decide()
                return
        # Blocks alternate, compiled first; a block that was no sample is run again.
        name = "compiled" if len(self.times["compiled"]) <= len(self.times["eager"]) else "eager"
        self.running = _Block(name, now, shape)

    def _now(self) -> float:
        self.synchronize()
        return self.clock()

    def _decide(self) -> None:
        self.running = None
        medians = torch.tensor(
            [statistics.median(self.times[k]) for k in ("compiled", "eager")], dtype=torch.float64, device=self.device
        )
        compiled, eager = self.agree(medians).tolist()
        self.chosen = "compiled" if compiled < eager * (1 - MARGIN) else "eager"
        self.say(
            f"--compile: {self.block}-step blocks, the device synchronized only at their ends, take "
            f"{compiled * 1e3:.3f} ms/step compiled and {eager * 1e3:.3f} ms/step eager (medians of {self.blocks} "
            f"blocks each, summed over ranks): training on with the {self.chosen} model"
        )
