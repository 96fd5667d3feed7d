"""Under DDP, the model's forward and backward replayed as CUDA graphs, with DDP's
all-reduce, the loss and the optimizer's update left eager: torch's partial-network
capture (`torch.cuda.make_graphed_callables`), which torch's CUDA graphs notes give for
DDP when its collectives are not captured. Capturing them too (the whole step, as one
process does, graph_step.py) needs NCCL's async error handling off, and the launcher
keeps it on so that a hung peer ends the collective instead of the job; this keeps the
rest. The graphed backward hands every gradient over at its end, and DDP's hooks then
all-reduce them as an eager step would, bucket by bucket.

The model is graphed before DDP wraps it (torch's order), on a random batch of the run's
shape; its BatchNorm statistics are put back afterwards, so the graph's warm-up passes
leave no trace in them. A batch of another shape (an epoch's last) and evaluation run
the model eagerly. A capture that fails is said in one line and the run goes on with
the eager model.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
from torch import nn


class GraphedModel(nn.Module):
    """The model, its training forward for batches of `shape` replayed from graphs."""

    def __init__(self, model: nn.Module, shape: torch.Size, graphed: Callable[[torch.Tensor], torch.Tensor]):
        super().__init__()
        self.model, self.shape, self.graphed = model, shape, graphed

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training and x.shape == self.shape:
            return self.graphed(x)
        return self.model(x)


def capture(
    model: nn.Module,
    sample: torch.Tensor,
    autocast: Callable[[], contextlib.AbstractContextManager],
    say: Callable[[str], None],
    make_graphed: Callable = torch.cuda.make_graphed_callables,
) -> nn.Module:
    """A GraphedModel over `model` for batches like `sample`; `model` itself when the
    capture fails (said). `autocast`: the run's, with its cast cache off (torch requires it)."""
    saved = [b.detach().clone() for b in model.buffers()]
    try:
        with autocast():
            make_graphed(model, (sample,))
    except Exception as exc:  # noqa: BLE001 - said, and the run trains eagerly
        vars(model).pop("forward", None)  # the class's own forward again, if it was replaced
        reason = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:200]}"
        say(f"step: eager, its forward and backward could not be captured as CUDA graphs ({reason})")
        return model
    finally:
        with torch.no_grad():
            for buffer, value in zip(model.buffers(), saved, strict=True):
                buffer.copy_(value)  # in place: the graphs read these very tensors
    # make_graphed_callables put the graphed forward on the instance; the model keeps its
    # own (evaluation, another shape), and the wrapper calls the graphed one.
    graphed = vars(model).pop("forward")
    return GraphedModel(model, sample.shape, graphed)
