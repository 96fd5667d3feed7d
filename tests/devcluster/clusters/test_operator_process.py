"""The dev cluster's operator process restarts like the chart's Deployment's container: an
end no stop() asked for (a lost leader Lease) is followed by a new process after a back-off
that doubles; a stop is never undone but by start()."""

from __future__ import annotations

import os
import pathlib
import signal
import sys
import time

from ddpjob_devcluster.clusters.client import wait_until
from ddpjob_devcluster.clusters.operator_process import OperatorProcess

EXITS = [sys.executable, "-c", "import sys; sys.exit(3)"]
RUNS = [sys.executable, "-c", "import time; time.sleep(60)"]


def process(tmp_path: pathlib.Path, command: list[str], **kwargs) -> OperatorProcess:
    return OperatorProcess(tmp_path / "k", tmp_path / "operator.log", command=command, env=dict(os.environ), **kwargs)


def test_an_end_nobody_asked_for_is_restarted_with_a_doubling_backoff(tmp_path: pathlib.Path) -> None:
    op = process(tmp_path, EXITS, restart=True, restart_backoff=0.2).start()
    try:
        wait_until(lambda: op.starts >= 3, 30, "not restarted twice")
        assert op.exits[:2] == [3, 3], op.exits
        log = op.log_tail()
        assert "operator exited 3 unasked; restarting in 0 s" in log and "operator start #3" in log, log
    finally:
        op.stop()
    stopped = op.starts
    time.sleep(1.0)  # longer than the back-offs so far (0.2, 0.4, 0.8 s)
    assert op.starts == stopped, "restarted after stop()"


def test_without_restart_an_end_is_final(tmp_path: pathlib.Path) -> None:
    op = process(tmp_path, EXITS).start()
    wait_until(lambda: not op.alive, 30, "did not exit")  # alive polls it
    time.sleep(0.5)
    assert op.returncode == 3 and op.starts == 1 and op.exits == [] and not op.alive


def test_a_stop_and_a_start_at_once_leave_one_process_and_no_unasked_end(tmp_path: pathlib.Path) -> None:
    op = process(tmp_path, RUNS, restart=True, restart_backoff=0.1).start()
    first = op.pid
    try:
        assert op.stop(signal.SIGKILL) == -signal.SIGKILL
        op.start()
        time.sleep(1.0)  # the killed process's watcher has long woken
        assert op.starts == 2 and op.exits == [] and op.alive and op.pid != first
    finally:
        op.stop()
    assert not op.alive
