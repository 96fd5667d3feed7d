"""Fixtures for the whole-system tests: a `LocalCluster` per test (emulator, the real
operator process, the process kubelet) that always leaves no process behind, and that
prints the job statuses, events, operator log and container logs when a test fails."""
from __future__ import annotations

import contextlib
import pathlib
from collections.abc import Iterator

import pytest

from ddpjob_devcluster.cluster import LocalCluster


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f'report_{report.when}', report)


@contextlib.contextmanager
def running_cluster(request: pytest.FixtureRequest, workdir: pathlib.Path) -> Iterator[LocalCluster]:
    """A started LocalCluster that always leaves no process behind, and that prints the
    diagnostics when the test failed."""
    local = LocalCluster(workdir, stop_grace=5.0)
    local.start()
    try:
        yield local
    finally:
        report = getattr(request.node, 'report_call', None)
        if report is None or report.failed:
            print('\n===== system diagnostics =====\n' + local.diagnostics())
        kubelet = local.kubelet
        local.stop()
        leftovers = kubelet.live_processes() if kubelet is not None else []
        assert not leftovers, f'processes left running after the test: {leftovers}'
        assert not (kubelet.errors if kubelet is not None else []), f'kubelet errors: {kubelet.errors}'


@pytest.fixture
def cluster(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[LocalCluster]:
    with running_cluster(request, tmp_path / 'cluster') as local:
        yield local
