"""`pytest --cpu-top N` (tests/support/cpu_time.py) ranks the tests by the CPU they cost,
their child processes' included, with xdist's workers and without, and says how much of
each was its fixtures'."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from tests.support.cpu_time import Tally

ROOT = pathlib.Path(__file__).resolve().parents[1]
# A test whose CPU is spent in a child process, and one that only sleeps.
SUITE = """
import subprocess, sys, time
import pytest

BURN = "import time\\nend = time.process_time() + 0.6\\nwhile time.process_time() < end: pass"

def test_burns_in_a_child():
    subprocess.run([sys.executable, "-c", BURN], check=True)

@pytest.fixture
def burning():
    yield
    subprocess.run([sys.executable, "-c", BURN], check=True)

def test_burns_in_its_fixture(burning):
    pass

def test_sleeps():
    time.sleep(0.6)
"""


def test_the_tally_ranks_by_seconds_and_gives_each_its_share() -> None:
    tally = Tally()
    tally.add("a", 1.0)
    tally.add("b", 3.0, fixtures=2.5)
    tally.add("a", 1.0)  # a test's phases add up
    lines = tally.lines(top=1)
    assert lines[0] == "2 tests, 5 CPU seconds; the 1 that cost the most:"
    assert lines[1:] == ["     3.0 s  60.0%  fixtures    2.5 s  b"]


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "xdist"])
def test_a_child_process_cpu_counts_for_its_test(tmp_path: pathlib.Path, workers: list[str]) -> None:
    (tmp_path / "test_suite.py").write_text(SUITE)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.support.cpu_time",
         "--cpu-top", "5", *workers, "test_suite.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    section = done.stdout.split("CPU per test", 1)[1].splitlines()[1:]
    assert section[0].startswith("3 tests, "), done.stdout
    rows = {row.split()[-1].split("::")[1]: row.split() for row in section[1:4]}
    # [seconds, "s", share, "fixtures", seconds, "s", nodeid]
    child, fixture, sleeps = rows["test_burns_in_a_child"], rows["test_burns_in_its_fixture"], rows["test_sleeps"]
    assert float(child[0]) >= 0.5 > float(child[4]), done.stdout
    assert float(fixture[0]) >= 0.5 and float(fixture[4]) >= 0.5, done.stdout
    assert float(sleeps[0]) < 0.5, done.stdout
