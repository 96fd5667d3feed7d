"""Fixtures for the whole-system tests: a `RealCluster` per test on the worker's real
control plane (upstream kube-apiserver, etcd, controller manager and scheduler; process
kubelets as Nodes; the operator installed from the chart, acting with its RBAC), that
always leaves no process behind and prints the job statuses, events, operator log and
container logs when a test fails."""
from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from ddpjob_devcluster.real_cluster import RealCluster
from tests.support.control_plane import real_cluster as running_cluster

__all__ = ['running_cluster']


@pytest.fixture
def cluster(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[RealCluster]:
    with running_cluster(request, tmp_path / 'cluster') as real:
        yield real


@pytest.fixture(scope='session')
def coscheduling_scheduler(control_plane: Any) -> Any:
    """scheduler-plugins' coscheduling scheduler beside the worker's control plane, started
    once (its PodGroup CRD and RBAC installed); it stops with the plane."""
    from ddpjob_devcluster.controlplane import coscheduling

    return coscheduling.start(control_plane, _admin_apply(control_plane))


@pytest.fixture(scope='session')
def volcano_scheduler(control_plane: Any) -> Any:
    """Volcano's scheduler and controllers beside the worker's control plane, started once
    (its CRDs and its chart's RBAC installed, the default Queue made); they stop with the plane."""
    from ddpjob_devcluster.controlplane import volcano

    return volcano.start(control_plane, _admin_apply(control_plane))


def _admin_apply(plane: Any) -> Any:
    """`apply(objects)`: server-side apply as the cluster's admin (a gang tool's CRDs and RBAC)."""
    from ddpjob_devcluster.cluster_api import ClusterClient
    from ddpjob_devcluster.controlplane import install

    kubectl = ClusterClient.kubectl_path()
    return lambda objects: install.apply(plane.admin_kubeconfig, objects, kubectl=kubectl)
