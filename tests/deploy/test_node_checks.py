"""The node scenarios' judge (hack/kind/node_checks.py), on records written as the trainer
writes them: each check passes on what shows the behaviour and fails, saying why, on what
does not (a survivor that never stepped alone, a resume before the newest checkpoint, a
sample trained twice, a stale writer's record)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

from tests.deploy.deploy_helpers import ROOT

CHECKS = ROOT / "hack" / "kind" / "node_checks.py"


def run(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHECKS), *map(str, args)], capture_output=True, text=True, timeout=60, cwd=ROOT
    )


def group(directory: pathlib.Path, gen: int, world: int, start: int, steps: list[tuple[int, float, list[int]]]) -> None:
    """One group's sample log, one file per rank (rank 0's here)."""
    lines: list[dict[str, object]] = [
        {"gen": gen, "start_step": start, "world": world, "t": steps[0][1] - 0.5 if steps else 0}
    ]
    lines += [{"epoch": 1, "step": s, "idx": idx, "t": t} for s, t, idx in steps]
    (directory / f"samples-{gen:020d}-r00000.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_resized_finds_the_first_group_of_a_size_begun_after_the_loss(tmp_path: pathlib.Path) -> None:
    group(tmp_path, 1, 2, 0, [(1, 100.0, [0, 1]), (2, 101.0, [2, 3]), (3, 109.0, [4, 5])])
    # The world-2 group's steps after the loss (at 105) are not the survivors' going on.
    assert run("resized", tmp_path, "--after", 105, "--world", 1).returncode == 1
    group(tmp_path, 2, 1, 3, [(4, 107.5, [6]), (5, 108.0, [7])])
    ok = run("resized", tmp_path, "--after", 105, "--world", 1)
    assert ok.returncode == 0 and ok.stdout.strip() == "step at world size 1 2.50 s after"
    assert (
        "no group of world size 2 began after 105.000" in run("resized", tmp_path, "--after", 105, "--world", 2).stderr
    )
    # Shrank, then grew back: the world-1 group stepped before a world-2 group formed again.
    assert (
        "but no group of world size 2 after it"
        in run("resized", tmp_path, "--after", 105, "--world", 1, "--then", 2).stderr
    )
    group(tmp_path, 3, 2, 5, [(6, 120.0, [8, 9])])
    grown = run("resized", tmp_path, "--after", 105, "--world", 1, "--then", 2)
    assert grown.stdout.strip() == "step at world size 1 2.50 s after, 2 step(s) at it, then world size 2 15.00 s after"
    # A group that has not yet taken N steps (the node scenario's next loss waits for 3).
    assert run("resized", tmp_path, "--after", 105, "--world", 1, "--steps", 2).returncode == 0
    short = run("resized", tmp_path, "--after", 105, "--world", 1, "--steps", 3)
    assert short.returncode == 1 and "began after 105.000 and took 3 steps" in short.stderr


def test_resumed_needs_the_newest_checkpoint_committed_before_the_loss(tmp_path: pathlib.Path) -> None:
    records = [
        {"event": "epoch", "step": 20, "restart": 0, "time": 90.0},
        {"event": "resume", "step": 20, "restart": 1, "time": 130.0},
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records) + '{"cut')
    group(tmp_path, 3, 2, 20, [(21, 131.5, [0])])
    ok = run("resumed", tmp_path, "--after", 100, "--saved", 20)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == "resumed at step 20 (attempt 1) 30.0 s after; next step 31.5 s after"
    late = run("resumed", tmp_path, "--after", 100, "--saved", 30)
    assert late.returncode == 1 and "a checkpoint at step 30 was committed" in late.stderr
    assert "no resume record after 140.000" in run("resumed", tmp_path, "--after", 140).stderr
    (tmp_path / "ckpt-e00001-s0000000030-t00000002-0123456789abcdef.pt").write_bytes(b"")
    (tmp_path / "ckpt-e00001-s0000000010-0123456789abcdef.pt").write_bytes(b"")
    assert run("newest-checkpoint", tmp_path).stdout.strip() == "30"


def test_exactly_once_counts_what_the_last_group_to_make_a_step_made(tmp_path: pathlib.Path) -> None:
    group(tmp_path, 1, 2, 0, [(1, 1.0, [0, 1]), (2, 2.0, [2, 3])])
    # A group that resumed at step 1 redoes step 2: what the lost group did after 1 is undone.
    group(tmp_path, 2, 1, 1, [(2, 5.0, [2, 3])])
    assert run("exactly-once", tmp_path, "--size", 4, "--epochs", 1).returncode == 0
    group(tmp_path, 3, 1, 2, [(3, 6.0, [0])])
    twice = run("exactly-once", tmp_path, "--size", 4, "--epochs", 1)
    assert twice.returncode == 1 and "0 sample(s) never trained on and 1 extra time(s)" in twice.stderr


def test_fenced_refuses_a_stale_terms_record_or_an_older_newest_checkpoint(tmp_path: pathlib.Path) -> None:
    records = [
        {"event": "resume", "step": 20, "term": 2, "time": 130.0},
        {"event": "step", "step": 21, "term": 2, "time": 131.0},
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "ckpt-e00001-s0000000030-t00000002-0123456789abcdef.pt").write_bytes(b"")
    assert run("fenced", tmp_path, "--after", 100).returncode == 0
    (tmp_path / "ckpt-e00001-s0000000040-t00000001-0123456789abcdef.pt").write_bytes(b"")
    assert run("fenced", tmp_path, "--after", 100).returncode == 0  # a stale file never wins: term first
    (tmp_path / "ckpt-e00001-s0000000030-t00000002-0123456789abcdef.pt").unlink()
    assert "is older than term 2" in run("fenced", tmp_path, "--after", 100).stderr
    records.append({"event": "preempted", "step": 40, "term": 1, "time": 140.0})
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert "1 record(s) of an older term" in run("fenced", tmp_path, "--after", 100).stderr
