"""`--compile` keeps whichever of the compiled and the eager model trains faster on the
run's own steps (compile_choice.py). Here the two "models" are stand-ins on a device of
the test's own: a host clock that each call advances by its launch time, and a device
queue that runs behind it, as a GPU does, and that `synchronize` waits for. So the
choice is known whatever the machine's load. The real torch.compile runs in the GPU tier
(tests/gpu, `--compile`), where the choice it made is checked in the run's metrics."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ddpjob_trainer.compile_choice import MARGIN, CompileChoice


class Device:
    """The host's clock, and when the device's queued work will be done."""

    def __init__(self) -> None:
        self.host = self.busy_until = 0.0

    def clock(self) -> float:
        return self.host

    def synchronize(self) -> None:
        self.host = max(self.host, self.busy_until)


class Timed(nn.Module):
    """A step that costs the host `launch` seconds and then the device `gpu` seconds; its
    input of another batch size costs `recompile` more on the host. Counts its calls."""

    def __init__(self, dev: Device, launch: float, gpu: float = 0.0, recompile: float = 0.0):
        super().__init__()
        self.dev, self.launch, self.gpu, self.recompile, self.calls = dev, launch, gpu, recompile, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        dev = self.dev
        dev.host += self.launch + (self.recompile if len(x) != 8 else 0.0)
        dev.busy_until = max(dev.busy_until, dev.host) + self.gpu
        return x


def choice_of(dev: Device, eager: Timed, compiled: Timed, **kw) -> CompileChoice:
    kw = {"grad_accum": 1, "say": lambda line: None, "warmup": 1, "block": 4, "blocks": 3, **kw}
    return CompileChoice(eager, compiled, torch.device("cpu"), clock=dev.clock, synchronize=dev.synchronize, **kw)


def drive(choice: CompileChoice, steps: int, batch: int = 8, partial_every: int = 0) -> None:
    for i in range(steps):
        rows = batch - 3 if partial_every and (i + 1) % partial_every == 0 else batch
        choice(torch.zeros(rows, 2))


def test_a_compiled_step_slower_in_training_is_refused_though_it_wins_when_timed_alone() -> None:
    # Eager: 1.0 ms of launches, 0.3 ms on the device; compiled: 1.2 ms of launches (guards,
    # wrappers), 0.05 ms on the device. A step synchronized on its own takes 1.3 ms eager
    # and 1.25 ms compiled; in training the device runs behind the host and a step takes
    # 1.0 ms eager and 1.2 ms compiled. The choice must see the second.
    dev = Device()
    eager, compiled = Timed(dev, 1e-3, 0.3e-3), Timed(dev, 1.2e-3, 0.05e-3)
    said: list[str] = []
    choice = choice_of(dev, eager, compiled, say=said.append)
    drive(choice, 1 + 2 * 3 * 4 + 1)  # warm-up, the trial, and the call that ends the last block
    assert choice.chosen == "eager", choice.times
    assert choice.times["eager"] == pytest.approx([1.0e-3 + 0.3e-3 / 4] * 3)  # the device's tail once per block
    assert choice.times["compiled"] == pytest.approx([1.2e-3 + 0.05e-3 / 4] * 3)
    assert len(said) == 1 and "with the eager model" in said[0] and "ms/step compiled" in said[0], said
    before = compiled.calls
    drive(choice, 5)
    assert compiled.calls == before, "the refused compiled model was called after the choice"
    # Each step timed on its own (blocks of one step: how --compile measured before) keeps
    # the compiled model, the slower one in training.
    dev = Device()
    alone = choice_of(dev, Timed(dev, 1e-3, 0.3e-3), Timed(dev, 1.2e-3, 0.05e-3), block=1)
    drive(alone, 1 + 2 * 3 + 1)
    assert alone.chosen == "compiled", alone.times


@pytest.mark.parametrize("compiled_s, eager_s, chosen", [(1e-3, 6e-3, "compiled"), (6e-3, 1e-3, "eager")])
def test_the_faster_model_is_kept_and_then_used_alone(compiled_s, eager_s, chosen) -> None:
    dev = Device()
    compiled, eager = Timed(dev, compiled_s), Timed(dev, eager_s)
    said: list[str] = []
    choice = choice_of(dev, eager, compiled, say=said.append, warmup=2, block=2, blocks=4)
    drive(choice, 2 + 2 * 4 * 2 + 1)
    assert choice.chosen == chosen and len(said) == 1 and f"with the {chosen} model" in said[0], said
    # The warm-up is compiled (it compiles), then blocks of 2 alternate: 4 of each.
    assert (compiled.calls, eager.calls) == (2 + 8 + (chosen == "compiled"), 8 + (chosen == "eager"))
    before = (compiled.calls, eager.calls)
    drive(choice, 5)
    after = (compiled.calls - before[0], eager.calls - before[1])
    assert after == ((5, 0) if chosen == "compiled" else (0, 5))


def test_a_compiled_model_faster_only_within_the_margin_is_not_kept() -> None:
    dev = Device()
    compiled, eager = Timed(dev, 1e-3 * (1 - MARGIN / 2)), Timed(dev, 1e-3)
    choice = choice_of(dev, eager, compiled)
    drive(choice, 1 + 2 * 3 * 4 + 1)
    assert choice.chosen == "eager"


def test_blocks_with_a_step_of_another_shape_are_no_sample() -> None:
    # Every tenth batch is partial (an epoch's last, and the recompile it costs): a block
    # holding one is not timed and runs again, so a slow partial batch on the compiled
    # side does not decide against it.
    dev = Device()
    compiled, eager = Timed(dev, 1e-3, recompile=0.5), Timed(dev, 4e-3)
    choice = choice_of(dev, eager, compiled)
    drive(choice, 100, partial_every=10)
    assert choice.chosen == "compiled", choice.times
    assert choice.times["compiled"] == pytest.approx([1e-3] * 3) and choice.times["eager"] == pytest.approx([4e-3] * 3)


def test_with_gradient_accumulation_a_model_keeps_every_micro_batch_of_its_step() -> None:
    dev = Device()
    compiled, eager = Timed(dev, 0), Timed(dev, 0)
    seen: list[str] = []
    choice = choice_of(dev, eager, compiled, grad_accum=2, warmup=1, block=2, blocks=100)
    for _ in range(14):
        c = compiled.calls
        choice(torch.zeros(4, 2))
        seen.append("c" if compiled.calls > c else "e")
    # the warm-up step (2 micro-batches), then blocks of 2 whole optimizer steps alternate
    assert "".join(seen) == "cc" + "cccceeee" + "cccc"


def test_every_rank_decides_on_the_sums_of_all_ranks_medians() -> None:
    # This rank saw compiled faster; the other ranks' sum says eager: all keep eager.
    sent: list[list[float]] = []

    def agree(medians: torch.Tensor) -> torch.Tensor:
        sent.append(medians.tolist())
        return medians + torch.tensor([1.0, 0.0], dtype=medians.dtype)

    dev = Device()
    choice = choice_of(dev, Timed(dev, 3e-3), Timed(dev, 1e-3), agree=agree, block=2, blocks=2)
    drive(choice, 1 + 2 * 2 * 2 + 1)
    assert len(sent) == 1 and sent[0][0] < sent[0][1] and choice.chosen == "eager"
