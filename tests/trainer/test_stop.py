"""A stop that finds the step stuck on a silent peer (stop.py): the rule on a clock of
the test's own, and two real nodes of ddpjob-launch on gloo, one of them frozen (SIGSTOP of
its whole process tree, as a paused or cut-off node: its connections stay open, nothing
answers) while the other is asked to stop."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddpjob_trainer import stop as stopping
from ddpjob_trainer.stop import FACTOR, FLOOR_S, StepClock
from tests.support.deadlines import RUN
from tests.trainer.trainer_helpers import BIN, contract, events, free_port


class Tick:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def steps(clock: StepClock, tick: Tick, *lengths: float) -> None:
    for length in lengths:
        clock.begin(1)
        tick.now += length
        clock.end()


def test_no_verdict_before_min_steps_have_ended_nor_between_steps() -> None:
    tick = Tick()
    clock = StepClock(tick)
    steps(clock, tick, *[1.0] * (stopping.MIN_STEPS - 1))
    clock.begin(3)
    tick.now += 1_000  # the first steps compile, probe and warm up: nothing to compare with yet
    assert clock.stuck() is None
    clock.end()
    assert clock.stuck() is None  # between steps (data loading, evaluation): not a step's wait
    clock.begin(4)
    tick.now += 3
    assert clock.stuck() == (4, 3.0, FACTOR * 1.0, 1.0)  # the median of 1, 1, 1000


def test_the_limit_is_the_floor_or_a_multiple_of_the_usual_step() -> None:
    tick = Tick()
    clock = StepClock(tick)
    steps(clock, tick, 9.0, 0.2, 0.5, 0.3)  # a slow first step (gloo connecting) is not the usual one
    clock.begin(5)
    tick.now += 7
    assert clock.stuck() == (5, 7.0, FLOOR_S, 0.5)  # the median (the upper of two); 10 x 0.5 is under the floor
    clock.end()
    steps(clock, tick, *[2.5] * 10)  # steps that grow slower (a larger batch, a straggler) raise it ...
    stuck = clock.stuck()
    assert stuck is None  # (between steps)
    clock.begin(16)
    stuck = clock.stuck()
    assert stuck is not None and stuck.limit == pytest.approx(FACTOR * 2.5)
    clock.end()
    steps(clock, tick, *[0.1] * stopping.RECENT)  # ... until they are no longer among the recent ones
    clock.begin(99)
    stuck = clock.stuck()
    assert stuck is not None and stuck.limit == FLOOR_S and stuck.usual == pytest.approx(0.1)


def test_a_save_is_never_stuck_and_not_counted_in_its_step() -> None:
    tick = Tick()
    clock = StepClock(tick)
    steps(clock, tick, 0.2, 0.2)
    clock.begin(3)
    tick.now += 1
    with clock.saving():
        tick.now += 600  # a large checkpoint to slow storage
        assert clock.stuck() is None
    tick.now += 1
    clock.end()
    assert list(clock.recent)[-1] == pytest.approx(2.0)  # the step without its save
    clock.begin(4)
    with clock.saving():
        tick.now += 600
        assert clock.stuck() is None
    tick.now += 1
    stuck = clock.stuck()
    assert stuck is not None and stuck.age == pytest.approx(1.0)


def test_a_saves_collectives_are_judged_outside_a_step_and_its_write_never() -> None:
    """A save at an epoch's end or on a stop waits on the peers (the RNG gather) with no
    step in flight: a peer frozen there must be found as in a step."""
    tick = Tick()
    clock = StepClock(tick)
    steps(clock, tick, 0.2, 0.2, 0.2)
    with clock.waiting():
        tick.now += FLOOR_S  # the gather, its peer frozen
        stuck = clock.stuck()
        assert stuck is not None and stuck.age == pytest.approx(FLOOR_S) and stuck.age >= stuck.limit
        with clock.saving():
            tick.now += 600  # rank 0's write
            assert clock.stuck() is None
        stuck = clock.stuck()
        assert stuck is not None and stuck.age == pytest.approx(FLOOR_S)
    assert clock.stuck() is None and len(clock.recent) == 3  # no step's length
    clock.begin(4)
    tick.now += 1
    with clock.waiting():  # inside a step: the step's own clock
        tick.now += 1
        stuck = clock.stuck()
        assert stuck is not None and stuck.age == pytest.approx(2.0)
    clock.end()
    assert list(clock.recent)[-1] == pytest.approx(2.0)


def test_a_wakeup_fd_already_taken_is_left_to_its_owner() -> None:
    # In a process of its own: the wakeup fd is the whole interpreter's.
    code = (
        "import os, signal\n"
        "from ddpjob_trainer import stop\n"
        "r, w = os.pipe(); os.set_blocking(w, False)\n"
        "signal.set_wakeup_fd(w)\n"
        "assert stop.watch(stop.StepClock(), print) is False\n"
        "assert signal.set_wakeup_fd(-1) == w\n"
        "assert stop.watch(stop.StepClock(), print) is True\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=RUN)
    assert done.returncode == 0, done.stderr


def tree(pid: int) -> list[int]:
    """`pid` and every process under it (from /proc: torchrun starts its workers in
    sessions of their own, so a process group would miss them)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(parents.get(p, []))
    return found


def signal_tree(pids: list[int], sig: int) -> None:
    for p in pids:
        with contextlib.suppress(ProcessLookupError):  # ended on its own
            os.kill(p, sig)


@pytest.mark.slow
def test_a_stop_while_a_peer_is_frozen_ends_the_rank_at_once_without_a_checkpoint(tmp_path: Path) -> None:
    """Without the watcher node 0's rank stays in its all-reduce (the group's timeout is an
    hour here) until torchrun kills it 30 s after the stop, exit 137, as the kubelet does
    once the Pod's grace is out."""
    port, metrics = free_port(), tmp_path / "metrics.jsonl"
    job = [
        "ddpjob-train",
        "--epochs",
        "100",
        "--synthetic-size",
        "1024",
        "--batch-size",
        "32",
        "--log-every",
        "1",
        "--checkpoint-every-steps",
        "1",  # every step: a save's gather is where a freeze once left the rank unjudged
        "--metrics-file",
        str(metrics),
    ]
    env = {"DDPJOB_TEST_STEP_SECONDS": "0.05", "DDPJOB_COLLECTIVE_TIMEOUT_SECONDS": "3600"}
    nodes = [
        subprocess.Popen(
            [str(BIN / "ddpjob-launch"), *job],
            env=contract(nnodes=2, node_rank=i, nproc=1, port=port, DDPJOB_CHECKPOINT_DIR=tmp_path, **env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in (0, 1)
    ]
    frozen: list[int] = []
    try:
        deadline = time.monotonic() + RUN
        while len(events(metrics, "step") if metrics.exists() else []) < 8:  # past a checkpoint
            assert time.monotonic() < deadline and all(n.poll() is None for n in nodes), nodes[0].communicate()[0]
            time.sleep(0.1)
        frozen = tree(nodes[1].pid)
        signal_tree(frozen, signal.SIGSTOP)
        nodes[0].send_signal(signal.SIGTERM)
        out = nodes[0].communicate(timeout=RUN)[0]
    finally:
        signal_tree(frozen or tree(nodes[1].pid), signal.SIGKILL)
        for n in nodes:
            if n.poll() is None:
                n.kill()
            n.communicate()
    assert nodes[0].returncode == 143, out[-3000:]
    assert "a peer neither answers nor closes its connection" in out, out[-3000:]
    assert "exiting without a checkpoint" in out
    assert not events(metrics, "preempted")  # nothing saved after the freeze, nothing claimed
