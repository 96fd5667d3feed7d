"""The request log (RBAC verbs) and fault injection."""
from __future__ import annotations

import time

import pytest
from kubernetes.client import ApiException

from tests.devcluster.emulator_helpers import collect_events
from ddpjob_devcluster.emulator import KubeEmulator, RecordedRequest
from ddpjob_devcluster.operator_runner import wait_for


def test_request_log_uses_rbac_verbs(core, emulator: KubeEmulator):
    core.create_namespaced_config_map('ns1', {'metadata': {'name': 'a'}})
    core.read_namespaced_config_map('a', 'ns1')
    core.list_namespaced_config_map('ns1')
    assert collect_events(core.list_namespaced_config_map, 1, 'ns1') == [('ADDED', 'a')]
    core.patch_namespaced_config_map('a', 'ns1', {'data': {'k': 'v'}})
    core.replace_namespaced_config_map('a', 'ns1', {'metadata': {'name': 'a'}})
    core.create_namespaced_pod('ns1', {'metadata': {'name': 'p'}, 'spec': {'containers': [{'name': 'c', 'image': 'i'}]}})
    core.patch_namespaced_pod_status('p', 'ns1', {'status': {'phase': 'Running'}})
    core.delete_namespaced_config_map('a', 'ns1')
    core.delete_collection_namespaced_pod('ns1')

    verbs = [(r.verb, r.resource, r.subresource) for r in emulator.requests]
    assert verbs == [
        ('create', 'configmaps', None), ('get', 'configmaps', None), ('list', 'configmaps', None),
        ('watch', 'configmaps', None), ('patch', 'configmaps', None), ('update', 'configmaps', None),
        ('create', 'pods', None), ('patch', 'pods', 'status'), ('delete', 'configmaps', None),
        ('deletecollection', 'pods', None),
    ]
    assert emulator.requests[0] == RecordedRequest('create', '', 'v1', 'configmaps', None, 'ns1', None)
    assert emulator.writes() == 7
    assert emulator.writes('pods') == 3


def test_discovery_requests_are_not_logged_as_resource_requests(core, emulator: KubeEmulator):
    import kubernetes
    assert kubernetes.client.CoreApi(core.api_client).get_api_versions().versions == ['v1']
    assert 'pods' in {r.name for r in core.get_api_resources().resources}
    assert emulator.requests == []


@pytest.mark.parametrize('status', [500, 503, 409])
def test_injected_failures_hit_the_next_n_matching_requests(core, emulator: KubeEmulator, status):
    emulator.inject_fault(verb='create', resource='configmaps', status=status, count=2)
    core.create_namespaced_pod('ns1', {'metadata': {'name': 'p'}, 'spec': {'containers': [{'name': 'c', 'image': 'i'}]}})  # not matching

    for _ in range(2):
        with pytest.raises(ApiException) as err:
            core.create_namespaced_config_map('ns1', {'metadata': {'name': 'a'}})
        assert err.value.status == status and '"kind": "Status"' in err.value.body

    assert core.create_namespaced_config_map('ns1', {'metadata': {'name': 'a'}}).metadata.uid
    assert emulator.get_object('v1/configmaps', 'ns1', 'a') is not None


def test_injected_delay_without_status_is_a_slow_server(core, emulator: KubeEmulator):
    emulator.inject_fault(verb='list', resource='configmaps', status=None, delay=0.3)
    started = time.monotonic()
    core.list_namespaced_config_map('ns1')
    assert time.monotonic() - started >= 0.3


def test_injected_hang_trips_the_client_timeout(core, emulator: KubeEmulator):
    # urllib3 retries a read timeout 3 times, so all 4 attempts must hang.
    emulator.inject_fault(verb='get', resource='configmaps', delay=30, count=4)
    with pytest.raises(Exception, match='(?i)timed? ?out'):
        core.read_namespaced_config_map('a', 'ns1', _request_timeout=0.2)


def test_wait_for_returns_the_value_and_reports_the_last_one():
    assert wait_for(lambda: 42, timeout=1) == 42
    with pytest.raises(AssertionError, match='last result: 0'):
        wait_for(lambda: 0, timeout=0.1, message='never')


def test_core_group_discovery_says_v1(core, emulator: KubeEmulator):
    # kubectl's REST mapper matches this string exactly; kmock alone says "/v1".
    resources = core.get_api_resources()
    assert resources.group_version == 'v1'
    assert 'pods' in {r.name for r in resources.resources}
