"""The gang deadlock on the real kube-scheduler (`ddpjob_devcluster.scenarios.real_gang`):
two 4-node jobs whose Pods interleave on six 1-GPU Nodes. Without a gang the real
scheduler binds 3 + 3 and both jobs hold their GPUs waiting for ever; with the native
gang the whole one runs first, then the other, with no GPU held idle.
(benchmarks/gang_deadlock.py measures the same for every integration.)"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from ddpjob_devcluster.scenarios import real_gang as real_gang_scenario
from tests.support.deadlines import CLUSTER_TEST

pytestmark = [pytest.mark.slow, pytest.mark.timeout(CLUSTER_TEST)]


def test_without_a_gang_the_real_scheduler_deadlocks_two_jobs(control_plane: Any, tmp_path: pathlib.Path) -> None:
    r = real_gang_scenario.run(control_plane, tmp_path, "none", deadlock_wait=5)
    assert r.deadlocked, r
    assert r.scheduled == {"job-a": 3, "job-b": 3} and r.order == [], r
    # Six bound Pods, each idle from its binding to the end of the observation.
    assert len(r.bindings) == 6 and r.idle_gpu_seconds >= 6 * 5, r


def test_with_the_native_gang_both_jobs_run_whole_one_after_the_other(
    control_plane: Any, tmp_path: pathlib.Path
) -> None:
    r = real_gang_scenario.run(control_plane, tmp_path, "kubernetes")
    assert r.finished == {"job-a": "Succeeded", "job-b": "Succeeded"} and not r.deadlocked, r
    # job-b's Pods were whole first; job-a's fourth came late and its gang waited for room.
    assert r.order == ["job-b", "job-a"] and len(r.bindings) == 8, r
    # Each gang bound whole: every Pod's peers existed when it was bound, so no GPU waited
    # on a missing one (benchmarks/gang_deadlock.py measures the idle GPU-seconds).
    assert r.peers_at_binding == [(job, 4) for job, _ in r.bindings], r
