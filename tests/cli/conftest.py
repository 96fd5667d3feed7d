"""Fixtures of the cluster commands' tests (test_cluster_commands, test_resubmit,
test_tensorboard_command): an API emulator, the user's kubeconfig pointing at it in the
namespace team-a (KUBECONFIG), and the project's CRD installed."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import kubernetes
import pytest

from ddpjob_devcluster.apiserver.emulator import KubeEmulator
from tests.conftest import project_crd

CRD = project_crd()


@pytest.fixture
def emulator() -> Iterator[KubeEmulator]:
    with KubeEmulator() as emu:
        yield emu


@pytest.fixture
def kubeconfig(emulator: KubeEmulator, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    path = emulator.write_kubeconfig(tmp_path / "kubeconfig", namespace="team-a")
    monkeypatch.setenv("KUBECONFIG", str(path))
    return path


@pytest.fixture
def with_crd(emulator: KubeEmulator, kubeconfig: pathlib.Path) -> KubeEmulator:
    api = kubernetes.config.new_client_from_config(str(kubeconfig))
    kubernetes.client.ApiextensionsV1Api(api).create_custom_resource_definition(CRD)  # type: ignore[arg-type]  # a dict body: the client sends it as it is
    return emulator
