"""`--cuda-graph` (graph_step.py) and the micro-step it captures (micro_step.py). The
capture itself needs a GPU and is in the GPU tier (tests/gpu); here: what is refused, in
one line naming the flag, and that the one micro-step the eager loop and the graph share
computes the loss, gradients and metric sums it promises."""
from __future__ import annotations

import argparse

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ddpjob_trainer import cli, graph_step
from ddpjob_trainer.micro_step import MicroStep

CUDA = torch.device("cuda", 0)  # a device object only: nothing here touches a GPU


def args(*argv: str) -> argparse.Namespace:
    return cli.parse(["--cuda-graph", *argv])


def test_a_single_process_adam_run_on_a_gpu_may_capture() -> None:
    assert graph_step.refusal(args(), CUDA, 1, elastic=False) is None
    assert graph_step.refusal(args("--optimizer", "adamw", "--amp", "bf16"), CUDA, 1, elastic=False) is None


@pytest.mark.parametrize("argv, device, world, elastic, words", [
    ((), torch.device("cpu"), 1, False, "--cuda-graph needs a CUDA device (this process has cpu)"),
    ((), CUDA, 2, False, "WORLD_SIZE=2"),
    ((), CUDA, 1, True, "an elastic job's share of each global batch changes"),
    (("--grad-accum", "2"), CUDA, 1, False, "--grad-accum must be 1"),
    (("--amp", "fp16"), CUDA, 1, False, "use bf16"),
    (("--optimizer", "sgd"), CUDA, 1, False, "not --optimizer sgd"),
    (("--compile",), CUDA, 1, False, "pick one"),
    (("--strategy", "dp"), CUDA, 1, False, "--strategy dp"),
])
def test_what_cannot_be_captured_is_refused_in_one_line(argv, device, world, elastic, words) -> None:
    why = graph_step.refusal(args(*argv), device, world, elastic)
    assert why is not None and words in why and "\n" not in why and why.startswith("--cuda-graph"), why


def micro(model: nn.Module, grad_accum: int = 1, world: int = 1) -> MicroStep:
    return MicroStep(model, torch.amp.GradScaler("cpu", enabled=False), None, torch.device("cpu"), grad_accum, world)


def test_the_micro_step_gives_the_losss_gradients_and_the_metric_sums() -> None:
    torch.manual_seed(0)
    model = nn.Linear(6, 3)
    x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
    step = micro(model, grad_accum=2)
    step(x, y)
    reference = nn.Linear(6, 3)
    reference.load_state_dict(model.state_dict())
    out = reference(x)
    (F.cross_entropy(out, y) / 2).backward()  # scaled for the two micro-batches per step
    assert torch.allclose(model.weight.grad, reference.weight.grad)
    loss_sum, correct = step.window.tolist()
    assert loss_sum == pytest.approx(F.cross_entropy(out, y).item() * 8, rel=1e-5)
    assert correct == (out.argmax(1) == y).sum().item()
    step(x, y)  # the sums and the gradients accumulate
    assert step.window[0].item() == pytest.approx(2 * loss_sum, rel=1e-5)
    assert torch.allclose(model.weight.grad, 2 * reference.weight.grad)


def test_an_elastic_share_is_scaled_to_the_mean_over_the_global_micro_batch() -> None:
    # This rank holds 3 of the 8 samples of a global micro-batch split over 2 ranks: DDP
    # averages the 2 ranks' gradients, so each scales its sum by 2 / 8.
    torch.manual_seed(1)
    model = nn.Linear(4, 2)
    x, y = torch.randn(3, 4), torch.randint(0, 2, (3,))
    step = micro(model, world=2)
    step(x, y, total=8)
    reference = nn.Linear(4, 2)
    reference.load_state_dict(model.state_dict())
    (F.cross_entropy(reference(x), y, reduction="sum") * 2 / 8).backward()
    assert torch.allclose(model.weight.grad, reference.weight.grad)
    # The window holds this rank's share of the global loss sum, in samples: loss x 8 / 2.
    assert step.window[0].item() == pytest.approx(
        F.cross_entropy(reference(x), y, reduction="sum").item(), rel=1e-5)
