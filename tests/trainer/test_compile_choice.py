"""`--compile` keeps whichever of the compiled and the eager model steps faster on the
run's own steps (compile_choice.py). Here the two "models" are stand-ins that advance a
clock of the test's own by known amounts, so the choice is known whatever the machine's
load. The real torch.compile runs in the GPU tier (tests/gpu, `--compile`), where the
choice it made is checked in the run's metrics."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from ddpjob_trainer.compile_choice import CompileChoice


NOW = [0.0]


def clock() -> float:
    return NOW[0]


class Timed(nn.Module):
    """Returns its input `seconds` later on the test's clock, and counts its calls."""

    def __init__(self, seconds: float, recompile: float = 0.0):
        super().__init__()
        self.seconds, self.recompile, self.calls = seconds, recompile, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        NOW[0] += self.seconds + (self.recompile if len(x) != 8 else 0.0)  # a partial batch recompiles
        return x


def drive(choice: CompileChoice, steps: int, batch: int = 8, partial_every: int = 0) -> None:
    for i in range(steps):
        rows = batch - 3 if partial_every and (i + 1) % partial_every == 0 else batch
        choice(torch.zeros(rows, 2))


@pytest.mark.parametrize("compiled_s, eager_s, chosen", [(0.001, 0.006, "compiled"), (0.006, 0.001, "eager")])
def test_the_faster_model_is_kept_and_then_used_alone(compiled_s, eager_s, chosen) -> None:
    said: list[str] = []
    compiled, eager = Timed(compiled_s), Timed(eager_s)
    choice = CompileChoice(eager, compiled, torch.device("cpu"), 1, said.append, warmup=2, trial=4, clock=clock)
    drive(choice, 2 + 2 * 4 + 1)  # warm-up, the trial, and the call that ends the last timed step
    assert choice.chosen == chosen and len(said) == 1 and f"with the {chosen} model" in said[0], said
    # The warm-up is compiled (it compiles), the trial alternates: 6 compiled, 4 eager.
    assert (compiled.calls, eager.calls) == (2 + 4 + (chosen == "compiled"), 4 + (chosen == "eager"))
    before = (compiled.calls, eager.calls)
    drive(choice, 5)
    after = (compiled.calls - before[0], eager.calls - before[1])
    assert after == ((5, 0) if chosen == "compiled" else (0, 5))


def test_steps_of_another_shape_are_no_sample() -> None:
    # Every third batch is partial (an epoch's last, and the recompile it costs): those
    # steps are not timed, so the trial needs more steps, and a slow partial batch on the
    # compiled side does not decide against it.
    compiled, eager = Timed(0.001, recompile=0.5), Timed(0.004)
    choice = CompileChoice(eager, compiled, torch.device("cpu"), 1, lambda line: None, warmup=1, trial=3, clock=clock)
    drive(choice, 30, partial_every=3)
    assert choice.chosen == "compiled"
    assert len(choice.times["compiled"]) == len(choice.times["eager"]) == 3
    assert choice.times["compiled"] == pytest.approx([0.001] * 3) and choice.times["eager"] == pytest.approx([0.004] * 3)


def test_with_gradient_accumulation_a_model_keeps_every_micro_batch_of_its_step() -> None:
    compiled, eager = Timed(0), Timed(0)
    seen: list[str] = []
    choice = CompileChoice(eager, compiled, torch.device("cpu"), 2, lambda line: None, warmup=1, trial=100, clock=clock)
    for _ in range(10):
        c, e = compiled.calls, eager.calls
        choice(torch.zeros(4, 2))
        seen.append("c" if compiled.calls > c else "e")
    # warm-up step (2 micro-batches), then whole optimizer steps alternate
    assert "".join(seen) == "cc" + "ccee" * 2


def test_every_rank_decides_on_the_sums_of_all_ranks_medians() -> None:
    # This rank saw compiled faster; the other ranks' sum says eager: all keep eager.
    sent: list[list[float]] = []

    def agree(medians: torch.Tensor) -> torch.Tensor:
        sent.append(medians.tolist())
        return medians + torch.tensor([1.0, 0.0], dtype=medians.dtype)

    choice = CompileChoice(Timed(0.003), Timed(0.001), torch.device("cpu"), 1, lambda line: None, agree,
                           warmup=1, trial=2, clock=clock)
    drive(choice, 1 + 4 + 1)
    assert len(sent) == 1 and sent[0][0] < sent[0][1] and choice.chosen == "eager"
