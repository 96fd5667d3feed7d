"""An epoch resumed at its very end (an elastic rejoin at an epoch boundary) trains no
step: its summary has no averages, so `epoch 6/10 done:` prints no zero loss, accuracy or
rate that would read as a collapse."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from types import SimpleNamespace

import torch
from torch import nn

from ddpjob_trainer.epoch import train_epoch
from ddpjob_trainer.progress import Progress


class Batches:
    def __len__(self) -> int:
        return 4

    def epoch(self, epoch: int, start: int):
        return iter([(torch.zeros(2, 1), torch.zeros(2, dtype=torch.long))] * (4 - start))


def resumed_at_the_end_of_epoch_6():
    d = SimpleNamespace(device=torch.device("cpu"), grouped=False, backend=None, world_size=1)
    return SimpleNamespace(
        args=SimpleNamespace(grad_accum=1, log_every=10, checkpoint_dir=None),
        d=d,
        progress=SimpleNamespace(start_epoch=lambda *a: None),
        data=SimpleNamespace(train=Batches()),
        micro=SimpleNamespace(window=torch.zeros(2)),
        in_place=None,
        pos=SimpleNamespace(batch=4, step=96),
    )


def test_an_epoch_with_no_step_prints_no_zeros():
    summary = train_epoch(resumed_at_the_end_of_epoch_6(), nn.Linear(1, 2), 6)
    assert summary["samples"] == 0 and not {"loss", "accuracy", "samples_per_s"} & set(summary)
    out = io.StringIO()
    with redirect_stdout(out):
        Progress(True, None, 0, 10, 10, torch.device("cpu")).end_epoch(epoch=6, step=96, **summary)
    line = out.getvalue().strip()
    assert line.startswith("epoch 6/10 done: step 96 samples 0 epoch_time_s ")
    assert "loss" not in line and "accuracy" not in line and "samples_per_s" not in line
