"""Backend `auto` picks what works: nccl only when every local process has a GPU of its
own, else gloo with one line; an explicit nccl with too few GPUs is refused in one line,
by the trainer, the launcher (before torchrun starts) and the job spec alike."""

from __future__ import annotations

from typing import Any

import pytest

from ddpjob.api import spec
from ddpjob_trainer import EXIT_BAD_INPUT, UsageError, launch
from ddpjob_trainer.backend import Choice, choose


@pytest.mark.parametrize(
    "requested,local_rank,local_world,gpus,expected",
    [
        (None, 0, 1, 0, Choice("gloo", None)),
        (None, 1, 2, 2, Choice("nccl", 1)),
        (None, 3, 4, 8, Choice("nccl", 3)),
        ("gloo", 1, 2, 2, Choice("gloo", 1)),
        ("gloo", 0, 2, 0, Choice("gloo", None)),
    ],
)
def test_choices_where_each_process_has_what_it_needs(requested, local_rank, local_world, gpus, expected) -> None:
    assert choose(requested, local_rank, local_world, gpus) == expected


def test_two_processes_on_one_gpu_use_gloo_and_say_so() -> None:
    first, second = choose(None, 0, 2, 1), choose(None, 1, 2, 1)
    assert (first.backend, first.device_index, second.device_index) == ("gloo", 0, 0)
    assert first.notice == "2 processes share 1 GPU(s) on this node: using gloo (nccl needs one GPU per process)"


def test_an_explicit_nccl_with_too_few_gpus_is_one_line() -> None:
    with pytest.raises(
        UsageError,
        match=r"^DDPJOB_BACKEND=nccl needs one GPU per process: 2 process\(es\) on this "
        r"node, 1 GPU\(s\) visible",
    ):
        choose("nccl", 1, 2, 1)


def test_the_launcher_refuses_before_starting_anything(monkeypatch, capsys) -> None:
    monkeypatch.setenv("DDPJOB_BACKEND", "nccl")
    for key, value in (
        ("NNODES", "1"),
        ("NODE_RANK", "0"),
        ("NPROC_PER_NODE", "2"),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", "29500"),
    ):
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(launch, "visible_gpus", lambda: 1)
    started: list[Any] = []

    def run(argv: list[str]) -> int:
        started.append(argv)
        return 0

    monkeypatch.setattr(launch, "run_forwarding_signals", run)
    monkeypatch.setattr(launch.os, "execvp", lambda *a: started.append(a))
    code = launch.main(["ddpjob-train"])
    assert code == EXIT_BAD_INPUT and started == []
    assert "DDPJOB_BACKEND=nccl needs one GPU per process" in capsys.readouterr().err


def test_the_spec_resolves_auto_to_gloo_when_processes_outnumber_gpus() -> None:
    def backend(**extra):
        body = {
            "apiVersion": "ddpjob.io/v1alpha1",
            "kind": "DDPJob",
            "metadata": {"name": "b"},
            "spec": {"image": "img", **extra},
        }
        return spec.parse_job(body).backend

    assert backend(gpusPerNode=1, nprocPerNode=2) == "gloo"
    assert backend(gpusPerNode=2, nprocPerNode=2) == "nccl"
    assert backend(gpusPerNode=4) == "nccl" and backend() == "gloo"
