"""Fixtures for the whole-system tests: a `RealCluster` per test on the worker's real
control plane (upstream kube-apiserver, etcd, controller manager and scheduler; process
kubelets as Nodes; the operator installed from the chart, acting with its RBAC), that
always leaves no process behind and prints the job statuses, events, operator log and
container logs when a test fails."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from ddpjob_devcluster.clusters.real import RealCluster
from tests.support.control_plane import real_cluster as running_cluster

__all__ = ["running_cluster"]


@pytest.fixture
def cluster(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[RealCluster]:
    with running_cluster(request, tmp_path / "cluster") as real:
        yield real
