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
    from ddpjob_devcluster.cluster_api import ClusterClient
    from ddpjob_devcluster.controlplane import coscheduling, install

    kubectl = ClusterClient.kubectl_path()
    return coscheduling.start(control_plane, lambda objects: install.apply(control_plane.admin_kubeconfig, objects,
                                                                           kubectl=kubectl))


@pytest.fixture(scope='session')
def kueue_controller(control_plane: Any) -> Any:
    """Kueue's manager beside the worker's control plane, started once (its CRDs, RBAC and
    webhooks installed from its module); it stops with the plane. Its Pod webhook then
    sees every Pod of the plane, as in a cluster: Pods without a queue-name label are
    not Kueue's."""
    from ddpjob_devcluster.cluster_api import ClusterClient
    from ddpjob_devcluster.controlplane import install, kueue

    kubectl = ClusterClient.kubectl_path()
    return kueue.start(control_plane, lambda objects: install.apply(control_plane.admin_kubeconfig, objects,
                                                                    kubectl=kubectl))
