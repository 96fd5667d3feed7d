"""Object semantics over HTTP with the official client: metadata, conflicts, subresources."""

from __future__ import annotations

import datetime
import json
import urllib.error
import urllib.request

import kubernetes
import pytest
from kubernetes.client import ApiException

from ddpjob_devcluster.apiserver.emulator import KubeEmulator
from tests.support.kubelet import set_pod_status


def pod(name: str, **labels) -> dict:
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "trainer", "image": "busybox"}]},
    }


def test_create_assigns_server_metadata(core):
    created = core.create_namespaced_config_map("ns1", {"metadata": {"name": "a"}, "data": {"k": "v"}})
    second = core.create_namespaced_config_map("ns1", {"metadata": {"name": "b"}})

    assert created.metadata.uid and created.metadata.uid != second.metadata.uid
    assert created.metadata.namespace == "ns1"
    assert created.metadata.generation == 1
    assert int(second.metadata.resource_version) > int(created.metadata.resource_version)
    age = datetime.datetime.now(datetime.UTC) - created.metadata.creation_timestamp
    assert abs(age.total_seconds()) < 60
    assert core.read_namespaced_config_map("a", "ns1").data == {"k": "v"}


def test_generate_name(core):
    created = core.create_namespaced_config_map("ns1", {"metadata": {"generateName": "job-"}})
    assert created.metadata.name.startswith("job-") and len(created.metadata.name) > len("job-")


def test_duplicate_create_is_409_already_exists(core):
    core.create_namespaced_config_map("ns1", {"metadata": {"name": "a"}})
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map("ns1", {"metadata": {"name": "a"}})
    assert err.value.status == 409
    assert '"reason": "AlreadyExists"' in err.value.body


def test_missing_object_is_404_status(core):
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("nope", "ns1")
    assert err.value.status == 404
    assert '"kind": "Status"' in err.value.body


def test_stale_resource_version_conflicts_on_put_and_patch(core):
    old = core.create_namespaced_config_map("ns1", {"metadata": {"name": "a"}, "data": {"k": "1"}})
    core.patch_namespaced_config_map("a", "ns1", {"data": {"k": "2"}})
    stale = {"metadata": {"name": "a", "resourceVersion": old.metadata.resource_version}, "data": {"k": "3"}}

    for call in (core.replace_namespaced_config_map, core.patch_namespaced_config_map):
        with pytest.raises(ApiException) as err:
            call("a", "ns1", stale)
        assert err.value.status == 409 and '"reason": "Conflict"' in err.value.body
    assert core.read_namespaced_config_map("a", "ns1").data == {"k": "2"}

    fresh = core.read_namespaced_config_map("a", "ns1")
    fresh.data = {"k": "4"}
    assert core.replace_namespaced_config_map("a", "ns1", fresh).data == {"k": "4"}


def test_json_patch_and_merge_patch(core):
    core.create_namespaced_config_map("ns1", {"metadata": {"name": "a", "labels": {"x": "1"}}, "data": {"k": "v"}})
    core.patch_namespaced_config_map("a", "ns1", [{"op": "add", "path": "/data/j", "value": "p"}])
    patched = core.patch_namespaced_config_map("a", "ns1", {"metadata": {"labels": {"x": None, "y": "2"}}})
    assert patched.data == {"k": "v", "j": "p"}
    assert patched.metadata.labels == {"y": "2"}


def test_pod_status_only_changes_through_the_subresource(core):
    core.create_namespaced_pod("ns1", pod("p"))
    core.patch_namespaced_pod("p", "ns1", {"status": {"phase": "Running"}})
    assert (
        core.read_namespaced_pod("p", "ns1").status is None or core.read_namespaced_pod("p", "ns1").status.phase is None
    )

    set_pod_status(core, "ns1", "p", "Failed", exit_code=137, reason="OOMKilled")
    after = core.read_namespaced_pod("p", "ns1")
    assert after.status.phase == "Failed"
    terminated = after.status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (137, "OOMKilled")
    assert after.metadata.generation == 1  # status writes never bump generation


def test_status_subresource_write_ignores_spec(core):
    core.create_namespaced_pod("ns1", pod("p"))
    core.patch_namespaced_pod_status("p", "ns1", {"spec": {"nodeName": "x"}, "status": {"phase": "Running"}})
    after = core.read_namespaced_pod("p", "ns1")
    assert after.spec.node_name is None and after.status.phase == "Running"


def test_no_op_write_keeps_resource_version(core):
    created = core.create_namespaced_config_map("ns1", {"metadata": {"name": "a"}, "data": {"k": "v"}})
    same = core.patch_namespaced_config_map("a", "ns1", {"data": {"k": "v"}})
    assert same.metadata.resource_version == created.metadata.resource_version


def test_namespaces_list_default_plus_on_demand(core):
    assert [ns.metadata.name for ns in core.list_namespace().items] == ["default"]
    core.create_namespaced_config_map("team-a", {"metadata": {"name": "a"}})
    assert {ns.metadata.name for ns in core.list_namespace().items} == {"default", "team-a"}
    assert core.read_namespace("team-a").metadata.uid


def test_delete_without_finalizers_removes_at_once(core):
    core.create_namespaced_config_map("ns1", {"metadata": {"name": "a"}})
    core.delete_namespaced_config_map("a", "ns1")
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("a", "ns1")
    assert err.value.status == 404


def test_finalizers_hold_deletion_until_removed(core):
    core.create_namespaced_config_map("ns1", {"metadata": {"name": "a", "finalizers": ["x/y"]}})
    core.delete_namespaced_config_map("a", "ns1")
    held = core.read_namespaced_config_map("a", "ns1")
    assert held.metadata.deletion_timestamp is not None

    core.patch_namespaced_config_map("a", "ns1", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException):
        core.read_namespaced_config_map("a", "ns1")


def _owned_by(owner, name: str) -> dict:
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": owner.metadata.name,
        "uid": owner.metadata.uid,
        "controller": True,
    }
    return {"metadata": {"name": name, "ownerReferences": [ref]}, "spec": pod(name)["spec"]}


def test_deleting_owner_collects_dependents(core, emulator: KubeEmulator):
    owner = core.create_namespaced_config_map("ns1", {"metadata": {"name": "owner"}})
    core.create_namespaced_pod("ns1", _owned_by(owner, "child-0"))
    core.create_namespaced_pod("ns1", _owned_by(owner, "child-1"))
    core.create_namespaced_pod("ns1", pod("bystander"))

    core.delete_namespaced_config_map("owner", "ns1")

    assert [p.metadata.name for p in core.list_namespaced_pod("ns1").items] == ["bystander"]
    assert emulator.get_object("v1/pods", "ns1", "child-0") is None


def test_a_dependent_whose_owners_are_all_absent_is_collected(core, emulator: KubeEmulator):
    """garbagecollector.go attemptToDeleteItem: a dependent is deleted once every owner is
    verified absent: gone, recreated with another uid, or (docs, "Owners and dependents")
    a namespaced owner in another namespace. The create itself succeeds."""
    owner = core.create_namespaced_config_map("ns1", {"metadata": {"name": "owner"}})
    core.create_namespaced_pod("ns1", _owned_by(owner, "child"))
    core.create_namespaced_pod("ns2", _owned_by(owner, "other-namespace"))
    core.delete_namespaced_config_map("owner", "ns1")
    created = core.create_namespaced_pod("ns1", _owned_by(owner, "too-late"))  # lost the race
    assert created.metadata.name == "too-late"
    core.create_namespaced_config_map("ns1", {"metadata": {"name": "owner"}})  # same name, new uid
    core.create_namespaced_pod("ns1", _owned_by(owner, "stale-uid"))
    assert core.list_namespaced_pod("ns1").items == [] and core.list_namespaced_pod("ns2").items == []
    again = core.read_namespaced_config_map("owner", "ns1")
    core.create_namespaced_pod("ns1", _owned_by(again, "current"))
    assert [p.metadata.name for p in core.list_namespaced_pod("ns1").items] == ["current"]


def test_orphan_propagation_keeps_dependents_and_drops_the_reference(core):
    owner = core.create_namespaced_config_map("ns1", {"metadata": {"name": "owner"}})
    core.create_namespaced_pod("ns1", _owned_by(owner, "child"))

    core.delete_namespaced_config_map(
        "owner", "ns1", body=kubernetes.client.V1DeleteOptions(propagation_policy="Orphan")
    )

    assert core.read_namespaced_pod("child", "ns1").metadata.owner_references is None


def test_delete_collection_by_label(core):
    core.create_namespaced_pod("ns1", pod("a", job="j"))
    core.create_namespaced_pod("ns1", pod("b", job="k"))
    core.delete_collection_namespaced_pod("ns1", label_selector="job=j")
    assert [p.metadata.name for p in core.list_namespaced_pod("ns1").items] == ["b"]


def test_kmock_objects_keep_the_history(core, emulator: KubeEmulator):
    core.create_namespaced_config_map("ns1", {"metadata": {"name": "a"}, "data": {"k": "1"}})
    core.patch_namespaced_config_map("a", "ns1", {"data": {"k": "2"}})
    history = emulator.objects["v1/configmaps", "ns1", "a"].history
    assert all(version is not None for version in history)
    assert [version["data"] for version in history if version is not None] == [{"k": "1"}, {"k": "2"}]


@pytest.mark.parametrize(
    "meta", [{"generation": "abc"}, {"labels": {"a": 1}}, {"annotations": []}, {"finalizers": "x"}, {"name": 5}]
)
def test_metadata_of_a_type_a_real_server_cannot_decode_is_a_400(emulator, meta) -> None:
    # kube-apiserver decodes the body into ObjectMeta first: wrong types are 400 BadRequest.
    # (Raw HTTP: the Python client would refuse to send these.)
    body = json.dumps({"metadata": {"name": "typed", **meta}, "data": {}}).encode()
    request = urllib.request.Request(
        f"{emulator.url}/api/v1/namespaces/default/configmaps",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": "Bearer emulator-token"},
    )
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(request, timeout=10)
    assert raised.value.code == 400 and "cannot unmarshal" in raised.value.read().decode()
