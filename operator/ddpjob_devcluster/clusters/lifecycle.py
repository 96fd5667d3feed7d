"""How a dev cluster starts and stops, written once: the work directory, the API side,
what is installed on it (the DDPJob CRD, or the chart with its RBAC), the nodes that run
Pods, the operator; on a failure at any step, whatever had started stops again, in
reverse. The cluster (`real.RealCluster`) supplies the steps; the steps' order and undoing
are tested on their own (tests/devcluster/clusters/test_lifecycle.py).
"""

from __future__ import annotations

import abc
import pathlib
from typing import Self

import kubernetes

from ddpjob_devcluster.clusters.client import ClusterClient, OperatorProcess


class Cluster(ClusterClient, abc.ABC):
    """A dev cluster's lifecycle: `start()` / `stop()`, or `with`."""

    api: kubernetes.client.ApiClient | None
    operator: OperatorProcess | None
    kubeconfig: pathlib.Path

    def start(self, *, operator: bool = True) -> Self:
        """Every step in order; `operator=False` leaves the operator process made but not
        started (a test starts, stops and restarts it itself)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self._start_api()
            self.api = kubernetes.config.new_client_from_config(str(self.kubeconfig))
            self._install()
            self._start_nodes()
            self.operator = self._operator_process()
            if operator:
                self.operator.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """The operator first (so it does not react to the nodes' teardown), then the nodes
        and every training process, then what was installed, then the API side. Safe to
        call more than once, and after a start that failed at any step."""
        if self.operator is not None:
            self.operator.stop()
        self._stop_nodes()
        if self.api is not None:
            self._uninstall()
            self.api.close()
            self.api = None
        self._stop_api()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- the steps a backend supplies ----

    @abc.abstractmethod
    def _start_api(self) -> None:
        """Serve the Kubernetes API and write `kubeconfig` for it."""

    @abc.abstractmethod
    def _install(self) -> None:
        """What the operator needs on the API: its CRD, namespace, RBAC."""

    @abc.abstractmethod
    def _start_nodes(self) -> None:
        """What places and runs Pods (scheduler, kubelets)."""

    @abc.abstractmethod
    def _operator_process(self) -> OperatorProcess:
        """The operator as its own process, not started yet."""

    @abc.abstractmethod
    def _stop_nodes(self) -> None:
        """Stop what `_start_nodes` started, whatever part of it did."""

    def _uninstall(self) -> None:
        """Give back what `_install` made that outlives the cluster (nothing by default)."""

    @abc.abstractmethod
    def _stop_api(self) -> None:
        """Stop what `_start_api` started, whatever part of it did."""
