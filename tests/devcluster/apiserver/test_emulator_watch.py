"""Selectors and watch streams over HTTP."""

from __future__ import annotations

import pytest
from kubernetes.client import ApiException

from ddpjob_devcluster.apiserver.registry.selectors import SelectorError, parse_field_selector, parse_label_selector
from ddpjob_devcluster.clusters.operator_runner import wait_for
from tests.devcluster.emulator_helpers import collect_events
from tests.support.deadlines import REACTION


@pytest.mark.parametrize(
    "selector, expected",
    [
        ("app=web", {"a"}),
        ("app==web", {"a"}),
        ("app!=web", {"b", "c"}),
        ("tier", {"a", "b"}),
        ("!tier", {"c"}),
        ("app in (web,db)", {"a", "b"}),
        ("app notin (web)", {"b", "c"}),
        ("app in (web, db),tier=front", {"a"}),
        ("", {"a", "b", "c"}),
    ],
)
def test_label_selectors(core, selector, expected):
    for name, labels in {"a": {"app": "web", "tier": "front"}, "b": {"app": "db", "tier": "back"}, "c": {}}.items():
        core.create_namespaced_config_map("ns1", {"metadata": {"name": name, "labels": labels}})
    found = core.list_namespaced_config_map("ns1", label_selector=selector).items
    assert {cm.metadata.name for cm in found} == expected


def test_bad_selector_is_400(core):
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map("ns1", label_selector="a in b")
    assert err.value.status == 400
    with pytest.raises(SelectorError):
        parse_field_selector("spec.nodeName=x")


def test_selector_parser_unit():
    assert parse_label_selector("x notin (1,2)")({})
    assert not parse_label_selector("x in (1,2)")({"x": "3"})


def test_field_selectors(core):
    core.create_namespaced_config_map("ns1", {"metadata": {"name": "a"}})
    core.create_namespaced_config_map("ns2", {"metadata": {"name": "b"}})
    by_name = core.list_config_map_for_all_namespaces(field_selector="metadata.name=b").items
    by_ns = core.list_config_map_for_all_namespaces(field_selector="metadata.namespace!=ns2").items
    assert [cm.metadata.name for cm in by_name] == ["b"]
    assert [cm.metadata.name for cm in by_ns] == ["a"]


def test_list_reports_the_latest_resource_version(core):
    created = core.create_namespaced_config_map("ns1", {"metadata": {"name": "a"}})
    listed = core.list_namespaced_config_map("ns1")
    assert listed.metadata.resource_version == created.metadata.resource_version


def test_watch_without_version_starts_with_the_current_state(core):
    core.create_namespaced_config_map("ns1", {"metadata": {"name": "a"}})
    core.create_namespaced_config_map("ns1", {"metadata": {"name": "b"}})
    assert collect_events(core.list_namespaced_config_map, 2, "ns1") == [("ADDED", "a"), ("ADDED", "b")]


def test_watch_from_a_resource_version_replays_later_events_in_order(core):
    core.create_namespaced_config_map("ns1", {"metadata": {"name": "before"}})
    rv = core.list_namespaced_config_map("ns1").metadata.resource_version
    core.create_namespaced_config_map("ns1", {"metadata": {"name": "a"}})
    core.create_namespaced_config_map("ns2", {"metadata": {"name": "elsewhere"}})
    core.patch_namespaced_config_map("a", "ns1", {"data": {"k": "v"}})
    core.delete_namespaced_config_map("a", "ns1")

    events = collect_events(core.list_namespaced_config_map, 3, "ns1", resource_version=rv)

    assert events == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]


def test_watch_streams_live_events_with_a_label_selector(core, emulator):
    import threading

    results = []
    watching = threading.Thread(
        target=lambda: results.extend(
            collect_events(core.list_namespaced_config_map, 1, "ns1", label_selector="keep=yes", resource_version="1")
        )
    )
    watching.start()
    core.create_namespaced_config_map("ns1", {"metadata": {"name": "skip", "labels": {"keep": "no"}}})
    core.create_namespaced_config_map("ns1", {"metadata": {"name": "kept", "labels": {"keep": "yes"}}})
    watching.join(timeout=REACTION)
    assert results == [("ADDED", "kept")]


def test_garbage_collection_emits_deleted_events(core):
    owner = core.create_namespaced_config_map("ns1", {"metadata": {"name": "owner"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    child = core.create_namespaced_config_map("ns1", {"metadata": {"name": "child", "ownerReferences": [ref]}})
    core.delete_namespaced_config_map("owner", "ns1")

    events = collect_events(core.list_namespaced_config_map, 2, "ns1", resource_version=child.metadata.resource_version)
    assert events == [("DELETED", "owner"), ("DELETED", "child")]


def test_watch_ends_at_the_server_timeout(core):
    import kubernetes

    events = list(kubernetes.watch.Watch().stream(core.list_namespaced_config_map, "ns1", timeout_seconds=1))
    assert events == []


def test_namespaces_can_be_watched(core):
    core.create_namespaced_config_map("team-a", {"metadata": {"name": "a"}})
    assert collect_events(core.list_namespace, 2) == [("ADDED", "default"), ("ADDED", "team-a")]


def test_writes_from_the_test_thread_wake_watchers(core, emulator):
    import threading

    import kmock

    results = []
    watching = threading.Thread(
        target=lambda: results.extend(
            collect_events(core.list_namespace, 1, resource_version=core.list_namespace().metadata.resource_version)
        )
    )
    watching.start()
    wait_for(lambda: any(r.verb == "watch" for r in emulator.requests), timeout=REACTION)
    emulator.store.create(kmock.resource("v1/namespaces"), None, {"metadata": {"name": "direct"}})
    watching.join(timeout=REACTION)
    assert results == [("ADDED", "direct")]
