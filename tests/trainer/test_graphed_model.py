"""Under DDP, the model's forward and backward replayed as CUDA graphs, the all-reduce
eager (graphed_model.py). torch's capture needs a GPU and runs in the GPU tier (two
processes on one GPU, tests/gpu); here a stand-in for `make_graphed_callables` that
marks what it replaced, and one that fails part way, as torch's does without CUDA."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
from torch import nn

from ddpjob_trainer import graphed_model


class Graphed:
    """The graphed forward: the model's own, counting its calls."""

    def __init__(self, forward: Callable[[torch.Tensor], torch.Tensor]) -> None:
        self.forward, self.calls = forward, 0

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.forward(x)


def fake_make_graphed(model: nn.Module, sample_args: tuple) -> nn.Module:
    """As torch does: warm-up passes (BatchNorm's statistics move), then the instance's
    forward replaced by the graphed one."""
    for _ in range(3):
        model(sample_args[0] * 10)
    model.forward = Graphed(model.forward)
    return model


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 3))


def test_batches_of_the_captured_shape_in_training_replay_and_the_rest_run_eagerly() -> None:
    m = model()
    said: list[str] = []
    wrapped = graphed_model.capture(m, torch.randn(8, 4), contextlib.nullcontext, said.append, fake_make_graphed)
    assert isinstance(wrapped, graphed_model.GraphedModel) and said == []
    graphed = wrapped.graphed
    assert isinstance(graphed, Graphed)
    wrapped.train()
    wrapped(torch.randn(8, 4))
    wrapped(torch.randn(5, 4))  # an epoch's last, partial batch
    assert graphed.calls == 1
    wrapped.eval()
    wrapped(torch.randn(8, 4))  # evaluation
    assert graphed.calls == 1
    assert "forward" not in vars(m), "the model itself must keep its own forward (evaluation, checkpoints)"
    assert {id(p) for p in wrapped.parameters()} == {id(p) for p in m.parameters()}  # what DDP all-reduces


def test_the_capture_leaves_no_trace_in_batchnorm_statistics() -> None:
    m = model()
    before = [b.clone() for b in m.buffers()]
    graphed_model.capture(m, torch.randn(8, 4), contextlib.nullcontext, lambda line: None, fake_make_graphed)
    assert all(torch.equal(a, b) for a, b in zip(before, m.buffers(), strict=True))


def failing_make_graphed(model: nn.Module, sample_args: tuple) -> nn.Module:
    """As torch's capture fails part way (on a machine without CUDA: "CUDA error: CUDA
    driver version is insufficient..."): the instance's forward already replaced. torch's
    own is not used here: on a GPU machine it captures these CPU tensors without failing."""
    model.forward = Graphed(model.forward)
    raise RuntimeError("CUDA error: CUDA driver version is insufficient for CUDA runtime version\nmore")


def test_a_failed_capture_is_said_once_and_the_model_trains_eagerly() -> None:
    m = model()
    said: list[str] = []
    out = graphed_model.capture(m, torch.randn(8, 4), contextlib.nullcontext, said.append, failing_make_graphed)
    assert out is m and "forward" not in vars(m)
    assert said == [
        "step: eager, its forward and backward could not be captured as CUDA graphs "
        "(RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version)"
    ], said
    out(torch.randn(8, 4)).sum().backward()
    assert all(p.grad is not None for p in m.parameters())
