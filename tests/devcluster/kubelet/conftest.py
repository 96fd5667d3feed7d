"""Fixtures of the process kubelet's tests: an emulated cluster, a CoreV1Api on it, and a
kubelet (stopped at the end with no process left and no error)."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import kubernetes
import pytest

from ddpjob_devcluster.clusters.local import ClusterEmulator
from ddpjob_devcluster.kubelet.kubelet import ProcessKubelet


@pytest.fixture
def emulator() -> Iterator[ClusterEmulator]:
    emu = ClusterEmulator()
    with emu:  # started, and stopped at the end
        yield emu


@pytest.fixture
def core(emulator: ClusterEmulator) -> Iterator[kubernetes.client.CoreV1Api]:
    config = kubernetes.client.Configuration()
    config.host = emulator.url
    client = kubernetes.client.ApiClient(config)
    yield kubernetes.client.CoreV1Api(client)
    client.close()


@pytest.fixture
def kubelet(emulator: ClusterEmulator, tmp_path: pathlib.Path) -> Iterator[ProcessKubelet]:
    kubelet = ProcessKubelet(emulator.url, tmp_path / "kubelet", stop_grace=1.0).start()
    try:
        yield kubelet
    finally:
        kubelet.stop()
        assert kubelet.live_processes() == []
        assert kubelet.errors == []
