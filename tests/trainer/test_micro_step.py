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
    --compile, where the DDP sits inside the compile choice (two gloo ranks)."""
    out = tmp_path / "seen.json"
    subprocess.run([sys.executable, str(SCRIPTS / "accumulate_probe.py"), wrapped, str(out)],
                   check=True, timeout=300, capture_output=True)
    assert json.loads(out.read_text()) == {"after_local_micro_step": False, "after_last_micro_step": True}
