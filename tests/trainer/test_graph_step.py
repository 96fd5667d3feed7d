"""The step captured as a CUDA graph (graph_step.py), by default wherever eligible, and
the micro-step it captures (micro_step.py). The capture itself needs a GPU and is in the
GPU tier (tests/gpu); here: which runs are eligible, what the run says in one line when
it captures and when it does not (and why), what `--cuda-graph` refuses, that a failed
capture falls back to eager steps, and that the one micro-step the eager loop and the
graph share computes the loss, gradients and metric sums it promises."""

from __future__ import annotations

import argparse

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ddpjob_trainer import UsageError, cli, graph_step
from ddpjob_trainer.micro_step import MicroStep


def args(*argv: str) -> argparse.Namespace:
    return cli.parse(list(argv))


def test_the_flag_is_three_way_and_unset_by_default() -> None:
    assert args().cuda_graph is None and args("--cuda-graph").cuda_graph is True
    assert args("--no-cuda-graph").cuda_graph is False


@pytest.mark.parametrize("argv", [(), ("--optimizer", "adamw", "--amp", "bf16"), ("--model", "cnn", "--channels-last")])
def test_by_default_a_single_process_adam_run_on_a_gpu_captures_and_says_so(argv) -> None:
    plan = graph_step.plan(args(*argv), "cuda", 1, elastic=False)
    assert plan.capture and plan.line is not None and "\n" not in plan.line
    assert plan.line.startswith("step: captured as one CUDA graph") and "the default on one GPU" in plan.line


# Each rule of eligibility, with the words the run says about it.
INELIGIBLE = [
    ((), "cpu", 1, False, "a CUDA graph needs a CUDA device (this process has cpu)"),
    ((), "cuda", 2, False, "DDP's all-reduce (WORLD_SIZE=2) is captured only with NCCL's async error handling off"),
    (("--sync-bn",), "cuda", 2, False, "DDP's all-reduce (WORLD_SIZE=2)"),  # SyncBatchNorm's collectives too
    ((), "cuda", 1, True, "an elastic job's share of each global batch changes size"),
    (("--grad-accum", "2"), "cuda", 1, False, "--grad-accum 2: a graph captures one optimizer step per batch"),
    (("--amp", "fp16"), "cuda", 1, False, "--amp fp16: the GradScaler reads its inf check on the host"),
    (("--optimizer", "sgd"), "cuda", 1, False, "--optimizer sgd: only adam and adamw are built capturable"),
    (("--compile",), "cuda", 1, False, "--compile: torch.compile captures CUDA graphs itself"),
    (("--strategy", "dp"), "cuda", 1, False, "--strategy dp: DataParallel's threads cannot be captured"),
]


@pytest.mark.parametrize("argv, device, world, elastic, words", INELIGIBLE)
def test_each_rule_of_eligibility_says_why_in_a_few_words(argv, device, world, elastic, words) -> None:
    why = graph_step.ineligible(args(*argv), device, world, elastic)
    assert why is not None and words in why and "\n" not in why, why


def test_by_default_under_ddp_the_forward_and_backward_are_captured_and_the_all_reduce_stays_eager() -> None:
    plan = graph_step.plan(args(), "cuda", 2, elastic=False)
    assert not plan.capture and plan.partial and plan.line is not None and "\n" not in plan.line
    assert plan.line.startswith("step: the model's forward and backward captured as CUDA graphs, the rest eager")
    assert "NCCL's async error handling off" in plan.line, plan.line  # why not the whole step
    for argv in (("--sync-bn",), ("--no-cuda-graph",), ("--grad-accum", "2"), ("--optimizer", "sgd")):
        assert not graph_step.plan(args(*argv), "cuda", 2, elastic=False).partial, argv
    assert not graph_step.plan(args(), "cuda", 2, elastic=True).partial


EAGER_UNDER_DDP = [c for c in INELIGIBLE if c[1] == "cuda" and (c[2] == 1 or c[0])]


@pytest.mark.parametrize("argv, device, world, elastic, words", EAGER_UNDER_DDP)
def test_by_default_an_ineligible_gpu_run_steps_eagerly_and_says_why_in_one_line(
    argv, device, world, elastic, words
) -> None:
    plan = graph_step.plan(args(*argv), device, world, elastic)
    assert not plan.capture and plan.line is not None and "\n" not in plan.line
    assert plan.line.startswith("step: eager, not captured as a CUDA graph: ") and words in plan.line, plan.line


def test_off_a_gpu_the_default_says_nothing_and_no_cuda_graph_says_eager() -> None:
    assert graph_step.plan(args(), "cpu", 4, elastic=False) == graph_step.Plan(False, None)
    plan = graph_step.plan(args("--no-cuda-graph"), "cuda", 1, elastic=False)
    assert not plan.capture and plan.line == "step: eager (--no-cuda-graph)"


@pytest.mark.parametrize("argv, device, world, elastic, words", INELIGIBLE)
def test_asked_for_what_cannot_be_captured_is_refused_in_one_line(argv, device, world, elastic, words) -> None:
    with pytest.raises(UsageError) as refused:
        graph_step.plan(args("--cuda-graph", *argv), device, world, elastic)
    why = str(refused.value)
    assert why.startswith("--cuda-graph: ") and words in why and "\n" not in why, why


def test_a_failed_capture_by_default_is_said_once_and_the_run_trains_on_eagerly() -> None:
    # On this machine (no CUDA) the capture itself fails: the fallback's path.
    torch.manual_seed(0)
    model = nn.Linear(6, 3)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    said: list[str] = []
    step = graph_step.CapturedStep(micro(model), optimizer, warmup=0, fallback=said.append)
    x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
    before = model.weight.detach().clone()
    for _ in range(3):
        step(x, y)
    assert len(said) == 1 and said[0].startswith("step: eager from here on, its capture as a CUDA graph failed ("), said
    assert step.eager and step.replays == 0 and not torch.equal(before, model.weight)
    assert all(p.grad is None for p in model.parameters())  # each eager step ends as the loop's does
    assert step.micro.window[0].item() > 0


def test_a_failed_capture_that_was_asked_for_is_raised() -> None:
    model = nn.Linear(6, 3)
    step = graph_step.CapturedStep(micro(model), torch.optim.Adam(model.parameters()), warmup=0)
    with pytest.raises(Exception):  # noqa: B017 - whatever torch raises without a CUDA driver
        step(torch.randn(8, 6), torch.randint(0, 3, (8,)))


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
    assert model.weight.grad is not None and reference.weight.grad is not None
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
    assert model.weight.grad is not None and reference.weight.grad is not None
    assert torch.allclose(model.weight.grad, reference.weight.grad)
    # The window holds this rank's share of the global loss sum, in samples: loss x 8 / 2.
    assert step.window[0].item() == pytest.approx(F.cross_entropy(reference(x), y, reduction="sum").item(), rel=1e-5)
