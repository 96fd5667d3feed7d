"""CustomResourceDefinitions: discovery after POST, CRUD, /status and generation."""

from __future__ import annotations

import kubernetes
import pytest
from kubernetes.client import ApiException

from tests.devcluster.emulator_helpers import WIDGET_CRD, widget


def test_custom_resource_is_unknown_before_its_crd(custom):
    with pytest.raises(ApiException) as err:
        custom.list_namespaced_custom_object("example.com", "v1", "ns1", "widgets")
    assert err.value.status == 404


def test_crd_post_makes_the_resource_discoverable(api, widgets):
    groups = kubernetes.client.ApisApi(api).get_api_versions().groups
    assert "example.com" in {g.name for g in groups}
    resources = kubernetes.client.CustomObjectsApi(api).get_api_resources("example.com", "v1").resources
    by_name = {r.name: r for r in resources}
    assert by_name["widgets"].kind == "Widget" and by_name["widgets"].namespaced
    assert "widgets/status" in by_name
    assert by_name["widgets"].short_names == ["wd"]


def test_crd_is_reported_established(api, widgets):
    crd = kubernetes.client.ApiextensionsV1Api(api).read_custom_resource_definition("widgets.example.com")
    assert {c.type: c.status for c in crd.status.conditions}["Established"] == "True"


def test_custom_object_crud_status_and_generation(widgets):
    created = widgets.create_namespaced_custom_object(
        "example.com", "v1", "ns1", "widgets", dict(widget("w", size=1), status={"ignored": True})
    )
    assert created["metadata"]["generation"] == 1 and "status" not in created

    status = widgets.patch_namespaced_custom_object_status(
        "example.com", "v1", "ns1", "widgets", "w", {"status": {"phase": "Running"}}
    )
    assert status["status"] == {"phase": "Running"} and status["metadata"]["generation"] == 1

    labelled = widgets.patch_namespaced_custom_object(
        "example.com", "v1", "ns1", "widgets", "w", {"metadata": {"labels": {"a": "b"}}, "status": {"phase": "X"}}
    )
    assert labelled["metadata"]["generation"] == 1  # metadata-only change
    assert labelled["status"] == {"phase": "Running"}  # main-resource writes ignore status

    resized = widgets.patch_namespaced_custom_object("example.com", "v1", "ns1", "widgets", "w", {"spec": {"size": 2}})
    assert resized["metadata"]["generation"] == 2

    widgets.delete_namespaced_custom_object("example.com", "v1", "ns1", "widgets", "w")
    assert widgets.list_namespaced_custom_object("example.com", "v1", "ns1", "widgets")["items"] == []


def test_deleting_the_crd_removes_the_resource(api, widgets):
    kubernetes.client.ApiextensionsV1Api(api).delete_custom_resource_definition(WIDGET_CRD["metadata"]["name"])
    with pytest.raises(ApiException) as err:
        widgets.list_namespaced_custom_object("example.com", "v1", "ns1", "widgets")
    assert err.value.status == 404


def test_events_can_be_posted_in_both_api_groups(api):
    involved = {"kind": "Widget", "name": "w", "namespace": "ns1"}
    kubernetes.client.CoreV1Api(api).create_namespaced_event(
        "ns1", {"metadata": {"generateName": "w."}, "involvedObject": involved, "reason": "Started", "message": "m"}
    )
    kubernetes.client.EventsV1Api(api).create_namespaced_event(
        "ns1",
        {
            "metadata": {"generateName": "w."},
            "regarding": involved,
            "reason": "Started",
            "note": "m",
            "action": "Create",
            "type": "Normal",
            "eventTime": "2024-01-01T00:00:00.000000Z",
            "reportingController": "x",
            "reportingInstance": "y",
        },
    )
    assert len(kubernetes.client.CoreV1Api(api).list_namespaced_event("ns1").items) == 1
    assert len(kubernetes.client.EventsV1Api(api).list_namespaced_event("ns1").items) == 1
