"""The GPU benchmarks (`make bench-gpu`: benchmarks/trainer_vs_seed.py and
benchmarks/resnet_imagefolder.py, `--quick`) run their logic on a CPU with `--smoke`: every
row a GPU run would print is printed here too, each complete on its own line (its figure,
what it is measured against, the goal's verdict), so a GPU loan never finds the script
broken. The figures themselves mean nothing here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.trainer.trainer_helpers import clean_env

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def smoke(script: str) -> list[str]:
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), "--smoke"],
        # A CPU run on a GPU machine too (the GPU tier runs this file): its rows are the CPU's.
        env=clean_env(CUDA_VISIBLE_DEVICES=""),
        capture_output=True,
        text=True,
        timeout=540,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.splitlines()


def test_the_mlp_benchmark_prints_each_row_complete() -> None:
    lines = smoke("trainer_vs_seed.py")
    assert any(re.fullmatch(r"seed tutorial loop +: +\d+ samples/s", line) for line in lines), lines
    eager = [line for line in lines if line.startswith("ddpjob-train eager")]
    assert len(eager) == 1, lines
    assert re.search(r": +\d+ samples/s, +[\d.]+x the seed loop \(goal >= 1.5x: (met|NOT met)\)$", eager[0]), eager


def test_the_resnet_benchmark_prints_each_row_complete() -> None:
    lines = smoke("resnet_imagefolder.py")
    assert any(re.match(r"ceiling, eager +: +\d+ images/s", line) for line in lines), lines
    assert any(
        re.match(r"reference, +1 workers: +\d+ images/s whole-epoch, +[\d.]+% of the eager ceiling", line)
        for line in lines
    ), lines
    ours = [line for line in lines if line.startswith("ddpjob-train --decode cpu")]
    assert len(ours) == 1 and re.search(
        r"[\d.]+x the reference, peak \d+ MiB \(goals >= 90% and >= 1.5x: "
        r"(met|NOT met)\)$",
        ours[0],
    ), lines


def test_make_bench_gpu_with_wheels_runs_both_quick_forms_from_the_offline_venv(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    dry = subprocess.run(
        ["make", "-n", "bench-gpu", f"WHEELS={tmp_path}", "PYTHON=/opt/gpu/bin/python"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert dry.returncode == 0, dry.stderr
    assert f'hack/gpu-venv.sh "/opt/gpu/bin/python" "{tmp_path}" .venv-gpu' in dry.stdout, dry.stdout
    assert "for b in trainer_vs_seed resnet_imagefolder" in dry.stdout, dry.stdout
    assert ".venv-gpu/bin/python -u benchmarks/$b.py --quick" in dry.stdout, dry.stdout  # -u: lines as they come
    assert "constraints.txt" not in dry.stdout and "-m venv .venv" not in dry.stdout, dry.stdout
