"""torch's and the interpreter's private names the trainer calls (private_api.py): the torch
they were checked against is the one constraints.txt pins, this torch has each of them as
checked, and one that is gone or reshaped is refused by name where it is used, instead
of a resize in place taking another path."""

from __future__ import annotations

import atexit
import pathlib
import re
from unittest import mock

import pytest
import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from ddpjob_trainer import group_reset, private_api, quick_exit
from ddpjob_trainer.private_api import PrivateAPIChanged

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_private_calls_were_checked_against_the_pinned_torch():
    pinned = re.search(r"^torch==(\S+)$", (ROOT / "constraints.txt").read_text(), re.M)
    assert pinned is not None
    assert pinned.group(1) == private_api.CHECKED_TORCH, (
        f"constraints.txt pins torch {pinned.group(1)}; private_api.py's private calls were checked against "
        f"torch {private_api.CHECKED_TORCH}: check each against the new torch, then change CHECKED_TORCH"
    )


def test_this_torch_has_every_private_call_as_checked():
    assert private_api.torch_problems() == [], torch.__version__


@pytest.fixture
def gloo_group():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    if dist.is_initialized():
        dist.destroy_process_group()
    group_reset.ABANDONED.clear()


def test_a_gone_abort_is_refused_by_name_and_the_group_is_left_alone(gloo_group, monkeypatch):
    monkeypatch.delattr(c10d, "_abort_process_group")
    with pytest.raises(PrivateAPIChanged, match=r"distributed_c10d\._abort_process_group\(group=None\)"):
        group_reset.abandon()
    assert dist.is_initialized() and group_reset.ABANDONED == []


def test_an_abort_with_another_signature_is_refused(gloo_group, monkeypatch):
    monkeypatch.setattr(c10d, "_abort_process_group", lambda group=None, *, wait=True: None)
    with pytest.raises(PrivateAPIChanged, match="_abort_process_group"):
        group_reset.abandon()


def test_a_registry_whose_entries_changed_shape_is_refused(gloo_group, monkeypatch):
    def pg_map(self) -> dict[dist.ProcessGroup, tuple[str, dist.Store, int]]:
        # The annotation is what is checked: the shape a later torch might name.
        return c10d._pg_map  # type: ignore[return-value]

    monkeypatch.setattr(type(c10d._world), "pg_map", property(pg_map))
    with pytest.raises(PrivateAPIChanged, match=r"pg_map's values as \(backend name, store\)"):
        group_reset.shrink([1], [], dist.HashStore())


def test_a_gone_backend_lookup_is_refused_not_taken_for_no_shrinking(monkeypatch):
    """Before, can_shrink caught the AttributeError and said False: a torch without
    `_get_backend` would have re-formed NCCL groups through the store, unseen."""
    group = mock.Mock(**{"_get_backend.return_value": mock.Mock(supports_shrinking=True)})
    assert group_reset.can_shrink(group)
    monkeypatch.delattr(dist.ProcessGroup, "_get_backend")
    with pytest.raises(PrivateAPIChanged, match=r"ProcessGroup\._get_backend\(device\)"):
        group_reset.can_shrink(group)


def test_a_group_without_a_backend_for_the_device_does_not_shrink():
    group = mock.Mock(**{"_get_backend.side_effect": RuntimeError("no backend for cuda")})
    assert not group_reset.can_shrink(group)


def test_the_refusal_names_this_torch_and_the_checked_one(monkeypatch):
    monkeypatch.delattr(c10d, "_abort_process_group")
    with pytest.raises(PrivateAPIChanged) as refused:
        private_api.require_torch()
    assert f"torch {torch.__version__}" in str(refused.value)
    assert f"checked against torch {private_api.CHECKED_TORCH}" in str(refused.value)


def test_the_quick_exit_without_atexits_runner_is_refused_not_skipped(monkeypatch):
    exits: list[int] = []
    monkeypatch.setattr(quick_exit.os, "_exit", exits.append)  # the process stays, whatever happens
    monkeypatch.delattr(atexit, "_run_exitfuncs")
    with pytest.raises(PrivateAPIChanged, match=r"atexit\._run_exitfuncs"):
        quick_exit.exit_now(143)
    assert exits == []
