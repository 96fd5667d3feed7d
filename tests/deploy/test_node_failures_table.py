"""benchmarks/node_failures.py reads the kind tier's `figure:` lines into docs/benchmarks.md's
table: each row is found in lines worded as the scenarios print them, and a row whose
line is missing says "not measured" rather than a number of another case."""

from __future__ import annotations

import subprocess
import sys

from tests.deploy.deploy_helpers import ROOT

SCRIPT = ROOT / "benchmarks" / "node_failures.py"
# As hack/kind/node_scenarios.sh and bench_scenarios.sh print them (2026-11-30).
LINES = [
    "elastic kill: next step at the smaller size 1.7 s after the loss",
    "elastic kill: kubectl get ddpj says 1/2 and NodeLost 13.8 s after the loss",
    "elastic freeze: next step at the smaller size 4.6 s after the loss",
    "elastic freeze: back at world size 2 9.1 s after the freeze, in the same Pod",
    "elastic pause: next step at the smaller size 4.8 s after the loss",
    "elastic pause: kubectl get ddpj says 1/2 and NodeLost 13.1 s after the loss",
    "elastic drain, from the drain's start: step at world size 1 0.83 s after, 67 step(s) at it, "
    "then world size 2 28.80 s after",
    "rigid kill: resumed at step 10 (attempt 1) 28.4 s after; next step 28.5 s after",
    "rigid partition: resumed at step 10 (attempt 1) 66.9 s after; next step 67.0 s after",
    "rigid drain: saved at step 20; resumed at step 20 (attempt 1) 26.2 s after; next step 26.3 s after",
    "plain rigid gang, Kubernetes' defaults: no step within 420 s of the kill (x)",
    "plain elastic gang, Kubernetes' defaults: next step 61.5 s after the kill",
]


def table(tmp_path, lines: list[str]) -> str:
    figures = tmp_path / "figures.txt"
    figures.write_text("\n".join(lines) + "\n")
    done = subprocess.run([sys.executable, str(SCRIPT), str(figures)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_every_case_is_read_from_the_lines_the_scenarios_print(tmp_path) -> None:
    out = table(tmp_path, LINES)
    assert "not measured" not in out, out
    for row in (
        "| elastic, drain: next step at the smaller size | 0.83 |",
        "| elastic, node frozen a few seconds: its own trainer back in the group | 9.1 |",
        "| rigid, drain: next step, resumed from the step it saved | 26.3 |",
        "| plain rigid gang, Kubernetes' defaults, node killed: next step | no step within 420 s |",
        "| plain elastic gang (torchrun's c10d), node killed: next step | 61.5 |",
    ):
        assert row in out, out
    # The drain's line is the script's own words.
    scenarios = (ROOT / "hack/kind/node_scenarios.sh").read_text()
    assert "figure \"elastic drain, from the drain's start: " in scenarios
    assert 'figure "elastic freeze: back at world size 2 $TOOK s after the freeze' in scenarios


def test_a_case_without_its_line_is_not_measured(tmp_path) -> None:
    out = table(tmp_path, [line for line in LINES if not line.startswith("elastic drain")])
    assert "| elastic, drain: next step at the smaller size | not measured |" in out, out
