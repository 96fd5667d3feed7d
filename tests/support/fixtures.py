"""Fixtures shared by the suites that talk to the API emulator (a pytest plugin: list it
in a conftest's `pytest_plugins`). Each suite defines its own `kubeconfig` fixture."""
from __future__ import annotations

from collections.abc import Iterator
import pathlib

import kubernetes
import pytest

from ddpjob_devcluster.emulator import KubeEmulator


@pytest.fixture
def emulator() -> Iterator[KubeEmulator]:
    """A fresh emulator per test: one starts in about 10 ms."""
    with KubeEmulator() as emu:
        yield emu


@pytest.fixture
def api(kubeconfig: pathlib.Path) -> Iterator[kubernetes.client.ApiClient]:
    client = kubernetes.config.new_client_from_config(str(kubeconfig))
    yield client
    client.close()
