"""`--batch-size auto`'s search and its promise to leave no trace (batch_probe.py). The
GPU tier runs the real probe (tests/gpu); here `fits` is a stand-in with a known limit."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch import nn

from ddpjob_trainer import batch_probe


@pytest.mark.parametrize("limit", [2, 3, 63, 64, 65, 1000, 4097])
def test_largest_finds_the_limit_to_within_a_sixteenth_in_few_tries(limit: int) -> None:
    tried: list[int] = []

    def fits(size: int) -> bool:
        tried.append(size)
        return size <= limit

    found = batch_probe.largest(fits)
    assert found <= limit and found >= limit - max(1, limit // 16), (limit, found, tried)
    assert len(tried) <= 2 * limit.bit_length() + 2, tried  # doubling, then bisection


def test_nothing_fits_is_zero_and_everything_fits_stops_at_the_cap() -> None:
    assert batch_probe.largest(lambda size: False) == 0
    assert batch_probe.largest(lambda size: size < 2) == 0  # a batch of 1 is never tried
    assert batch_probe.largest(lambda size: True, limit=100) == 64  # the last doubling within the cap


def test_choose_leaves_the_model_and_optimizer_as_they_were(monkeypatch: pytest.MonkeyPatch) -> None:
    # The probe's steps are real optimizer steps; what training starts from must not see them.
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)  # CPU stands in for the GPU
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    original = batch_probe.step_fits

    def capped(*args, **kwargs):
        fits = original(*args, **kwargs)
        return lambda size: size <= 40 and fits(size)

    monkeypatch.setattr(batch_probe, "step_fits", capped)
    chosen = batch_probe.choose(model, optimizer, (4,), 3, torch.device("cpu"), contextlib.nullcontext, False)
    assert chosen == int(40 * batch_probe.MARGIN), chosen  # 90% of the largest that fitted
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before), "the probe changed the weights or buffers"
    assert not optimizer.state, "the probe's Adam moments were kept"


def test_choose_says_so_when_not_even_a_batch_of_two_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    from ddpjob_trainer import UsageError

    monkeypatch.setattr(batch_probe, "step_fits", lambda *args, **kwargs: lambda size: False)
    model = nn.Linear(4, 3)
    with pytest.raises(UsageError, match="not even a batch of 2 fits on cpu"):
        batch_probe.choose(
            model,
            torch.optim.SGD(model.parameters(), lr=0.1),
            (4,),
            3,
            torch.device("cpu"),
            contextlib.nullcontext,
            False,
        )
