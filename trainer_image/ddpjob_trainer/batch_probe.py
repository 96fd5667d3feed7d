"""`--batch-size auto`: the largest per-process batch whose training step fits on the GPU.

The only reliable way to know what fits is to try it: each try runs one whole training
step (forward under the job's autocast and memory format, backward, optimizer step) of the
job's model on a synthetic batch of the dataset's shape. Sizes double from 2 (a batch
of 1 cannot train a BatchNorm layer) until one
runs out of memory, then the gap is bisected to within 1/16; the chosen size is 90% of
the largest that fitted, because the real run also holds DDP's gradient buckets, the
DataLoader's pinned buffers and a fragmented cache. Every rank probes its own GPU and all
take the smallest answer (one job's GPUs may have different free memory).

The probe must leave no trace: the model's weights and buffers are put back from a copy
on the CPU, and the optimizer forgets the state the probe's steps made, so the training
that follows starts exactly where it would have. On a CPU there is no memory limit to find
(the host swaps or the kernel kills the process): `--batch-size auto` is refused there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from . import UsageError

LIMIT = 1 << 16  # no per-process batch beyond this is tried
MARGIN = 0.9


def largest(fits: Callable[[int], bool], limit: int = LIMIT) -> int:
    """The largest b in 2..limit with fits(b), to within 1/16, for a `fits` that is true up
    to some size and false beyond (0: not even 2 fits). Tries about 2 x log2(answer) sizes."""
    good, bad, size = 0, None, 2
    while size <= limit:
        if not fits(size):
            bad = size
            break
        good, size = size, size * 2
    if bad is None or good == 0:
        return good
    while bad - good > max(1, good // 16):
        middle = (good + bad) // 2
        if fits(middle):
            good = middle
        else:
            bad = middle
    return good


def step_fits(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    input_shape: tuple,
    classes: int,
    device: torch.device,
    autocast: Callable[[], contextlib.AbstractContextManager],
    channels_last: bool,
) -> Callable[[int], bool]:
    def fits(size: int) -> bool:
        out_of_memory = False
        # Named before the step so that all three can be dropped whatever point it reached.
        x: torch.Tensor | None = None
        y: torch.Tensor | None = None
        loss: torch.Tensor | None = None
        try:
            x = torch.randn(size, *input_shape, device=device)
            if channels_last and x.dim() == 4:
                x = x.contiguous(memory_format=torch.channels_last)
            y = torch.randint(0, classes, (size,), device=device)
            with autocast():
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            torch.cuda.synchronize(device)
        except torch.OutOfMemoryError:
            out_of_memory = True  # handled outside: the traceback holds the failed step's tensors
        x = y = loss = None  # freed before the cache is emptied
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.empty_cache()
        return not out_of_memory

    return fits


def choose(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    input_shape: tuple,
    classes: int,
    device: torch.device,
    autocast: Callable[[], contextlib.AbstractContextManager],
    channels_last: bool,
) -> int:
    """Probe this GPU (leaving the model and optimizer as they were); every rank's minimum.
    UsageError when not even a batch of 2 fits on some rank."""
    saved = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
    found = largest(step_fits(model, optimizer, input_shape, classes, device, autocast, channels_last))
    model.load_state_dict(saved)
    optimizer.state.clear()  # Adam's moments and step counts from the probe's steps
    answer = torch.tensor([max(1, int(found * MARGIN)) if found else 0], device=device)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.all_reduce(answer, op=torch.distributed.ReduceOp.MIN)
    if not answer.item():
        raise UsageError(f"--batch-size auto: not even a batch of 2 fits on {device} (or another rank's GPU)")
    return int(answer.item())
