"""Fixtures for the emulator's own tests: a fresh emulator per test (they start in ~10 ms)."""
from __future__ import annotations

import pathlib
from collections.abc import Iterator

import kubernetes
import pytest

from tests.support.emulator import KubeEmulator

WIDGET_CRD = {
    'apiVersion': 'apiextensions.k8s.io/v1',
    'kind': 'CustomResourceDefinition',
    'metadata': {'name': 'widgets.example.com'},
    'spec': {
        'group': 'example.com',
        'scope': 'Namespaced',
        'names': {'plural': 'widgets', 'singular': 'widget', 'kind': 'Widget', 'shortNames': ['wd']},
        'versions': [{
            'name': 'v1', 'served': True, 'storage': True,
            'subresources': {'status': {}},
            'schema': {'openAPIV3Schema': {'type': 'object', 'x-kubernetes-preserve-unknown-fields': True}},
        }],
    },
}


@pytest.fixture
def emulator() -> Iterator[KubeEmulator]:
    with KubeEmulator() as emu:
        yield emu


@pytest.fixture
def kubeconfig(emulator: KubeEmulator, tmp_path: pathlib.Path) -> pathlib.Path:
    return emulator.write_kubeconfig(tmp_path / 'kubeconfig')


@pytest.fixture
def api(kubeconfig: pathlib.Path) -> Iterator[kubernetes.client.ApiClient]:
    client = kubernetes.config.new_client_from_config(str(kubeconfig))
    yield client
    client.close()


@pytest.fixture
def core(api: kubernetes.client.ApiClient) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(api)


@pytest.fixture
def custom(api: kubernetes.client.ApiClient) -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(api)


@pytest.fixture
def widgets(api: kubernetes.client.ApiClient, custom: kubernetes.client.CustomObjectsApi):
    """The Widget CRD installed over HTTP, as a Helm chart or kubectl would."""
    kubernetes.client.ApiextensionsV1Api(api).create_custom_resource_definition(WIDGET_CRD)
    return custom


def widget(name: str, **spec) -> dict:
    return {'apiVersion': 'example.com/v1', 'kind': 'Widget', 'metadata': {'name': name}, 'spec': spec}


def collect_events(list_fn, count: int, *args, **kwargs) -> list[tuple[str, str]]:
    """The first `count` watch events as (type, name); a 5 s server timeout guards a hang."""
    watch = kubernetes.watch.Watch()
    events = []
    for event in watch.stream(list_fn, *args, timeout_seconds=5, **kwargs):
        obj = event['object']
        name = obj['metadata']['name'] if isinstance(obj, dict) else obj.metadata.name
        events.append((event['type'], name))
        if len(events) == count:
            watch.stop()
            break
    return events
