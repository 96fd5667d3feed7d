"""The micro-step's gradient accumulation under DDP, as the trainer wraps the model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parent / "scripts"


@pytest.mark.parametrize("wrapped", ["ddp", "compiled"])
def test_a_micro_step_that_does_not_end_the_step_keeps_gradients_local(tmp_path, wrapped) -> None:
    """--grad-accum with DDP: no all-reduce before the step's last micro-batch, also with
    --compile, where the DDP sits inside the compile choice (two gloo ranks). Each rank
    ends as the trainer does (distributed.teardown): a compiled DDP left to interpreter
    shutdown aborted it (SIGABRT) in about half of the runs, so both must exit 0."""
    out, script = tmp_path / "seen.json", str(SCRIPTS / "accumulate_probe.py")
    ranks = [
        subprocess.Popen(
            [sys.executable, script, str(rank), str(tmp_path / "rendezvous"), wrapped, str(out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in (0, 1)
    ]
    try:
        said = [r.communicate(timeout=300)[0] for r in ranks]
    finally:
        for r in ranks:
            r.kill()
    assert [r.returncode for r in ranks] == [0, 0], said
    assert json.loads(out.read_text()) == {"after_local_micro_step": False, "after_last_micro_step": True}
