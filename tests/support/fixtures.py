"""Fixtures shared by the suites that talk to the API emulator (a pytest plugin: list it
in a conftest's `pytest_plugins`). Each suite defines its own `kubeconfig` fixture."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

# kubernetes and the emulator are imported when a test asks for them: the trainer's and
# the GPU tier's tests run where only the trainer's dependencies are installed.


@pytest.fixture
def emulator() -> Iterator[Any]:
    """A fresh emulator per test: one starts in about 10 ms."""
    from ddpjob_devcluster.apiserver.emulator import KubeEmulator

    with KubeEmulator() as emu:
        yield emu


@pytest.fixture
def api(kubeconfig: pathlib.Path) -> Iterator[Any]:
    import kubernetes

    client = kubernetes.config.new_client_from_config(str(kubeconfig))
    yield client
    client.close()
