"""`--compile` that is never slower than eager: the compiled model is timed against the
eager one on the run's own steps, and the faster is kept.

torch.compile's gain depends on the model, the batch and the GPU, and it can lose: a
small launch-bound model can pay more in guards and autograd wrappers than fusion saves
(measured on one H100 for the 784-512-256-10 MLP at batch 64: 27,671 samples/s compiled,
45,582 eager). Nobody can tell in advance, so the run measures. After the compiled
model's warm-up (compilation, a recompile for a new shape), optimizer steps alternate
between the two, each timed from one step's forward to the next with the device
synchronized; the medians, summed over the ranks so that every rank keeps the same
model, decide. Both share the same parameters, so every trial step is
a real training step, and after the trial nothing is synchronized any more.

Shapes stay static (`dynamic=False`): a run has one batch shape and an epoch's last,
partial batch, and once torch marks the batch dimension dynamic every step pays for it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import cast

import torch
from torch import nn

WARMUP_STEPS = 3  # compiled steps before timing: compilation, autotuning
TRIAL_STEPS = 12  # timed optimizer steps of each model


def compile_model(model: nn.Module) -> nn.Module:
    # torch.compile of a Module returns an OptimizedModule, a Module; its stub says Callable.
    return cast(nn.Module, torch.compile(model, dynamic=False))


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
        trial: int = TRIAL_STEPS,
        clock: Callable[[], float] = time.perf_counter,
    ):
        """`agree`: a sum over the ranks (every rank reaches the decision at the same step)."""
        super().__init__()
        self.eager, self.compiled = eager, compiled
        self.device, self.grad_accum, self.say, self.agree = device, grad_accum, say, agree
        self.warmup, self.trial, self.clock = warmup, trial, clock
        self.times: dict[str, list[float]] = {"compiled": [], "eager": []}
        self.chosen: str | None = None
        self.calls = 0
        self.running: tuple[str, float, torch.Size] | None = None  # the step being timed

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.chosen is not None:
            return self.compiled(x) if self.chosen == "compiled" else self.eager(x)
        step, first = divmod(self.calls, self.grad_accum)
        self.calls += 1
        if first == 0:  # an optimizer step begins: the previous one has ended
            self._stop_clock(x.shape)
            if self.chosen is not None:
                return self.forward(x)
            if step >= self.warmup:
                self.running = ("compiled" if (step - self.warmup) % 2 == 0 else "eager", self._now(), x.shape)
        name = self.running[0] if self.running else "compiled"
        return self.compiled(x) if name == "compiled" else self.eager(x)

    def _now(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return self.clock()

    def _stop_clock(self, shape: torch.Size) -> None:
        if self.running is None:
            return
        name, started, timed_shape = self.running
        self.running = None
        # A step of another shape (an epoch's partial batch, and its recompile) is no sample.
        if shape == timed_shape:
            self.times[name].append(self._now() - started)
        if min(len(t) for t in self.times.values()) >= self.trial:
            self._decide()

    def _decide(self) -> None:
        medians = torch.tensor(
            [statistics.median(self.times[k]) for k in ("compiled", "eager")], dtype=torch.float64, device=self.device
        )
        compiled, eager = self.agree(medians).tolist()
        self.chosen = "compiled" if compiled <= eager else "eager"
        self.say(
            f"--compile: a step takes {compiled * 1e3:.2f} ms compiled and {eager * 1e3:.2f} ms eager "
            f"(median of {self.trial} each, summed over ranks): training on with the {self.chosen} model"
        )
