"""The request log (RBAC verbs) and fault injection."""

from __future__ import annotations

import time

import pytest
from kubernetes.client import ApiException

from ddpjob_devcluster.apiserver.emulator import KubeEmulator
from ddpjob_devcluster.apiserver.request_log import RecordedRequest
from ddpjob_devcluster.clusters.operator_runner import wait_for
from tests.devcluster.emulator_helpers import collect_events


def test_request_log_uses_rbac_verbs(core, emulator: KubeEmulator):
    core.create_namespaced_config_map("ns1", {"metadata": {"name": "a"}})
    core.read_namespaced_config_map("a", "ns1")
    core.list_namespaced_config_map("ns1")
    assert collect_events(core.list_namespaced_config_map, 1, "ns1") == [("ADDED", "a")]
    core.patch_namespaced_config_map("a", "ns1", {"data": {"k": "v"}})
    core.replace_namespaced_config_map("a", "ns1", {"metadata": {"name": "a"}})
    core.create_namespaced_pod(
        "ns1", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    )
    core.patch_namespaced_pod_status("p", "ns1", {"status": {"phase": "Running"}})
    core.delete_namespaced_config_map("a", "ns1")
    core.delete_collection_namespaced_pod("ns1")

    verbs = [(r.verb, r.resource, r.subresource) for r in emulator.requests]
    assert verbs == [
        ("create", "configmaps", None),
        ("get", "configmaps", None),
        ("list", "configmaps", None),
        ("watch", "configmaps", None),
        ("patch", "configmaps", None),
        ("update", "configmaps", None),
        ("create", "pods", None),
        ("patch", "pods", "status"),
        ("delete", "configmaps", None),
        ("deletecollection", "pods", None),
    ]
    assert emulator.requests[0] == RecordedRequest("create", "", "v1", "configmaps", None, "ns1", None)


def test_discovery_requests_are_not_logged_as_resource_requests(core, emulator: KubeEmulator):
    import kubernetes

    assert kubernetes.client.CoreApi(core.api_client).get_api_versions().versions == ["v1"]
    assert "pods" in {r.name for r in core.get_api_resources().resources}
    assert emulator.requests == []


@pytest.mark.parametrize("status", [500, 503, 409])
def test_injected_failures_hit_the_next_n_matching_requests(core, emulator: KubeEmulator, status):
    emulator.inject_fault(verb="create", resource="configmaps", status=status, count=2)
    core.create_namespaced_pod(
        "ns1", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    )  # not matching

    for _ in range(2):
        with pytest.raises(ApiException) as err:
            core.create_namespaced_config_map("ns1", {"metadata": {"name": "a"}})
        assert err.value.status == status and '"kind": "Status"' in str(err.value.body)

    assert core.create_namespaced_config_map("ns1", {"metadata": {"name": "a"}}).metadata.uid
    assert emulator.get_object("v1/configmaps", "ns1", "a") is not None


def test_injected_delay_without_status_is_a_slow_server(core, emulator: KubeEmulator):
    emulator.inject_fault(verb="list", resource="configmaps", status=None, delay=0.3)
    started = time.monotonic()
    core.list_namespaced_config_map("ns1")
    assert time.monotonic() - started >= 0.3


def test_injected_hang_trips_the_client_timeout(core, emulator: KubeEmulator):
    # urllib3 retries a read timeout 3 times, so all 4 attempts must hang.
    emulator.inject_fault(verb="get", resource="configmaps", delay=30, count=4)
    with pytest.raises(Exception, match=r"(?i)timed? ?out"):
        core.read_namespaced_config_map("a", "ns1", _request_timeout=0.2)


def test_wait_for_returns_the_value_and_reports_the_last_one():
    assert wait_for(lambda: 42, timeout=1) == 42
    with pytest.raises(AssertionError, match="last result: 0"):
        wait_for(lambda: 0, timeout=0.1, message="never")


def test_core_group_discovery_says_v1(core, emulator: KubeEmulator):
    # kubectl's REST mapper matches this string exactly; kmock alone says "/v1".
    resources = core.get_api_resources()
    assert resources.group_version == "v1"
    assert "pods" in {r.name for r in resources.resources}


def test_each_request_goes_to_the_reaction_kmocks_order_would_pick(
    core, custom, widgets, emulator: KubeEmulator, monkeypatch
):
    """The shortcut to the action's reaction (`_candidates`) picks what trying every
    reaction in kmock's priority order picks, for each kind of request."""
    picks: list = []
    candidates = KubeEmulator._candidates

    def checked(self, request):
        chosen = candidates(self, request)
        first = next((p for p in emulator._in_order() if emulator._sees(p, request)), None)
        picks.append((request.method, str(request.url.path), chosen, first))
        return chosen

    monkeypatch.setattr(KubeEmulator, "_candidates", checked)
    import kubernetes

    kubernetes.client.CoreApi(core.api_client).get_api_versions()
    kubernetes.client.ApisApi(core.api_client).get_api_versions()
    kubernetes.client.VersionApi(core.api_client).get_code()
    core.create_namespaced_config_map("ns1", {"metadata": {"name": "a"}})
    core.read_namespaced_config_map("a", "ns1")
    core.list_config_map_for_all_namespaces()
    assert collect_events(core.list_namespaced_config_map, 1, "ns1") == [("ADDED", "a")]
    core.patch_namespaced_config_map("a", "ns1", {"data": {"k": "v"}})
    core.replace_namespaced_config_map("a", "ns1", {"metadata": {"name": "a"}})
    core.create_namespaced_pod(
        "ns1", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    )
    core.patch_namespaced_pod_status("p", "ns1", {"status": {"phase": "Running"}})
    core.read_namespace("ns1")
    custom.create_namespaced_custom_object(
        "example.com",
        "v1",
        "ns1",
        "widgets",
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}},
    )
    custom.list_cluster_custom_object("example.com", "v1", "widgets")
    core.delete_namespaced_config_map("a", "ns1")
    core.delete_collection_namespaced_pod("ns1")
    with pytest.raises(ApiException):
        core.read_namespaced_config_map("gone", "ns1")

    assert len(picks) >= 15
    shortcuts = [(m, path) for m, path, chosen, _ in picks if chosen]
    assert len(shortcuts) >= 10  # the shortcut is taken for resource requests ...
    wrong = [(m, path) for m, path, chosen, first in picks if chosen and chosen[0] is not first]
    assert wrong == []  # ... and always agrees with the full order


def test_a_reaction_added_by_a_test_is_seen_before_the_shortcut(core, emulator: KubeEmulator):
    emulator["get", "/api/v1/namespaces/ns1/configmaps/a"] << {"metadata": {"name": "from-a-reaction"}}
    assert core.read_namespaced_config_map("a", "ns1").metadata.name == "from-a-reaction"
