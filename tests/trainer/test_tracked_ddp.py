"""tracked_ddp.wrap: DDP whose every collective a lost peer can end. Two gloo ranks in
separate processes (tests/trainer/scripts/tracked_ddp_probe.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from ddpjob_trainer import UsageError, tracked_ddp

SCRIPT = Path(__file__).parent / "scripts" / "tracked_ddp_probe.py"


def run_pair(tmp_path: Path, case: str) -> list[dict]:
    procs = [
        subprocess.Popen(
            [sys.executable, str(SCRIPT), str(r), str(tmp_path / "rdzv"), str(tmp_path / "out"), case],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in (0, 1)
    ]
    try:
        out0 = procs[0].communicate(timeout=240)[0]
        assert procs[0].returncode == 0, out0
        if case.startswith("freeze"):  # rank 1 stopped itself: it never ends alone
            procs[1].send_signal(signal.SIGKILL)
            procs[1].wait(30)
            return [json.loads((tmp_path / "out0.json").read_text())]
        out1 = procs[1].communicate(timeout=240)[0]
        assert procs[1].returncode == 0, out1
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(30)
    return [json.loads((tmp_path / f"out{r}.json").read_text()) for r in (0, 1)]


def test_it_trains_as_torchs_ddp_does(tmp_path):
    """From different weights: the same parameters on both ranks, and per rank the same
    parameters and BatchNorm statistics as torch's DDP (rank 0's sent at the wrap and
    before every forward, the gradients averaged)."""
    ranks = run_pair(tmp_path, "same")
    for r in ranks:
        assert r["tracked"].keys() == r["torch"].keys()
        for name, value in r["torch"].items():
            assert torch.allclose(torch.tensor(r["tracked"][name]), torch.tensor(value), atol=1e-6), name
    weights = [k for k in ranks[0]["tracked"] if k.endswith("weight")]
    assert weights and all(ranks[0]["tracked"][k] == ranks[1]["tracked"][k] for k in weights)


@pytest.mark.parametrize("case", ["freeze-wrap", "freeze-step2"])
def test_a_trip_ends_a_wait_on_a_frozen_peer_inside_ddps_own_collectives(tmp_path, case):
    """A peer frozen before the wrap (DDP's initial broadcast) or before the second step
    (DDP's bucket rebuild): the survivor's wait ends with the trip's reason (GroupLost; from
    the backward, the reducer's error around it). With DDP's
    collectives on the real group it waited out the group's timeout (60 s), inside C++."""
    (rank0,) = run_pair(tmp_path, case)
    assert rank0["ended"] in ("GroupLost", "RuntimeError") and "peer frozen" in rank0["why"], rank0


def test_the_group_is_the_jobs_own():
    with pytest.raises(UsageError, match="process_group"):
        tracked_ddp.wrap(nn.Linear(2, 2), None, None, None, process_group=object())
