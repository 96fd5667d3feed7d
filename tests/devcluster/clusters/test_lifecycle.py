"""The one start and stop both clusters share (`clusters/lifecycle.Cluster`), on a cluster
whose steps only record themselves: the order of the steps, and what a failure at a step
stops. The real cluster runs it in tests/system (RealCluster)."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from ddpjob_devcluster.clusters.lifecycle import Cluster


class Operator:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def start(self) -> None:
        self.log.append("operator started")

    def stop(self) -> None:
        self.log.append("operator stopped")


KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""


class Recording(Cluster):
    def __init__(self, workdir: pathlib.Path, fail_at: str | None = None) -> None:
        self.workdir, self.kubeconfig, self.namespace = workdir, workdir / "kubeconfig", "default"
        self.api, self.operator = None, None
        self.fail_at = fail_at
        self.log: list[str] = []

    def _step(self, name: str) -> None:
        if name == self.fail_at:
            raise RuntimeError(f"{name} failed")
        self.log.append(name)

    def _start_api(self) -> None:
        self._step("api")
        self.kubeconfig.write_text(KUBECONFIG)  # the client is made from it (and dials nothing)

    def _install(self) -> None:
        self._step("install")

    def _start_nodes(self) -> None:
        self._step("nodes")

    def _operator_process(self) -> Any:
        self._step("operator made")
        return Operator(self.log)

    def _stop_nodes(self) -> None:
        self.log.append("nodes stopped")

    def _uninstall(self) -> None:
        assert self.api is not None, "uninstalled through the client, before it is closed"
        self.log.append("uninstalled")

    def _stop_api(self) -> None:
        self.log.append("api stopped")


def test_the_steps_run_in_order_and_stop_in_reverse(tmp_path: pathlib.Path) -> None:
    cluster = Recording(tmp_path / "work")
    with cluster:
        assert (tmp_path / "work").is_dir()
        assert cluster.log == ["api", "install", "nodes", "operator made", "operator started"]
    assert cluster.log[5:] == ["operator stopped", "nodes stopped", "uninstalled", "api stopped"]
    assert cluster.api is None


def test_without_the_operator_it_is_made_but_not_started(tmp_path: pathlib.Path) -> None:
    cluster = Recording(tmp_path)
    cluster.start(operator=False)
    assert cluster.log == ["api", "install", "nodes", "operator made"]
    cluster.stop()


@pytest.mark.parametrize("step", ["api", "install", "nodes", "operator made"])
def test_a_failed_step_stops_what_started_and_raises(tmp_path: pathlib.Path, step: str) -> None:
    cluster = Recording(tmp_path, fail_at=step)
    with pytest.raises(RuntimeError, match=f"{step} failed"):
        cluster.start()
    started = ["api", "install", "nodes", "operator made"]
    before = started[: started.index(step)]
    assert cluster.log[: len(before)] == before
    # The operator was never made, so nothing stops it; nothing is uninstalled without a client.
    stops = ["nodes stopped"] + (["uninstalled"] if step != "api" else []) + ["api stopped"]
    assert cluster.log[len(before) :] == stops
    cluster.stop()  # a second stop is harmless
    assert cluster.api is None and cluster.operator is None
