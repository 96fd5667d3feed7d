"""The gang tier (`make test-gangs`): gang schedulers and queues on their real upstream
components, each built from its pinned Go module (`make gang-schedulers`) and started
once per test worker beside that worker's real control plane; they stop with it.
`make test` leaves this folder out (the builds and scenarios take as long as the rest of
the suite); CI runs both."""

from __future__ import annotations

from typing import Any

import pytest

from tests.system.conftest import cluster, running_cluster

__all__ = ["cluster", "running_cluster"]


@pytest.fixture(scope="session")
def coscheduling_scheduler(control_plane: Any) -> Any:
    """scheduler-plugins' coscheduling scheduler and its controller (PodGroup CRD, RBAC)."""
    from ddpjob_devcluster.controlplane import coscheduling, install

    return coscheduling.start(control_plane, install.admin_apply(control_plane))


@pytest.fixture(scope="session")
def volcano_scheduler(control_plane: Any) -> Any:
    """Volcano's scheduler and controllers (its CRDs and its chart's RBAC installed, the
    default Queue made); they stop with the plane."""
    from ddpjob_devcluster.controlplane import install, volcano

    return volcano.start(control_plane, install.admin_apply(control_plane))


@pytest.fixture(scope="session")
def kueue_controller(control_plane: Any) -> Any:
    """Kueue's manager (its CRDs, RBAC and webhooks installed from its module). Its Pod
    webhook then sees every Pod of the plane, as in a cluster: Pods without a queue-name
    label are not Kueue's."""
    from ddpjob_devcluster.controlplane import install, kueue

    return kueue.start(control_plane, install.admin_apply(control_plane))
