"""Fixtures for the emulator's own tests: a fresh emulator per test (they start in ~10 ms)."""

from __future__ import annotations

import pathlib

import kubernetes
import pytest

from ddpjob_devcluster.apiserver.emulator import KubeEmulator
from tests.devcluster.emulator_helpers import WIDGET_CRD


@pytest.fixture
def kubeconfig(emulator: KubeEmulator, tmp_path: pathlib.Path) -> pathlib.Path:
    return emulator.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def core(api: kubernetes.client.ApiClient) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(api)


@pytest.fixture
def custom(api: kubernetes.client.ApiClient) -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(api)


@pytest.fixture
def widgets(api: kubernetes.client.ApiClient, custom: kubernetes.client.CustomObjectsApi):
    """The Widget CRD installed over HTTP, as a Helm chart or kubectl would."""
    kubernetes.client.ApiextensionsV1Api(api).create_custom_resource_definition(WIDGET_CRD)  # type: ignore[arg-type]  # a dict body: the client sends it as it is
    return custom
