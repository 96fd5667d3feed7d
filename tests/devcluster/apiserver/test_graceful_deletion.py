"""Graceful deletion of Pods, as the API server does it (pkg/registry/core/pod/strategy.go
CheckGracefulDelete, apiserver/pkg/registry/rest/delete.go BeforeDelete): a Pod on a node
stays Terminating until its kubelet confirms, a lost kubelet never does, a force delete
(grace 0) removes it at once."""

from __future__ import annotations

import kubernetes
import pytest


def pod(name: str, node: str | None = "node-a", grace: int | None = None) -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "i"}]}
    if node:
        spec["nodeName"] = node
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"metadata": {"name": name}, "spec": spec}


def test_a_pod_on_a_node_stays_terminating_until_its_kubelet_confirms(core) -> None:
    core.create_namespaced_pod("ns1", pod("p"))
    core.delete_namespaced_pod("p", "ns1")
    p = core.read_namespaced_pod("p", "ns1")
    assert p.metadata.deletion_timestamp is not None and p.metadata.deletion_grace_period_seconds == 30
    # A lost kubelet never confirms: a later delete with a longer grace changes nothing ...
    core.delete_namespaced_pod("p", "ns1", grace_period_seconds=60)
    assert core.read_namespaced_pod("p", "ns1").metadata.deletion_grace_period_seconds == 30
    # ... a shorter one moves the deadline earlier ...
    core.delete_namespaced_pod("p", "ns1", grace_period_seconds=10)
    q = core.read_namespaced_pod("p", "ns1")
    assert q.metadata.deletion_grace_period_seconds == 10
    assert (p.metadata.deletion_timestamp - q.metadata.deletion_timestamp).total_seconds() == 20
    # ... a status write by the kubelet does not end it ...
    core.patch_namespaced_pod_status("p", "ns1", {"status": {"phase": "Running"}})
    assert core.read_namespaced_pod("p", "ns1").metadata.deletion_timestamp is not None
    # ... and a delete of grace 0 (the kubelet's confirmation, or a force delete) does.
    core.delete_namespaced_pod("p", "ns1", grace_period_seconds=0)
    with pytest.raises(kubernetes.client.ApiException) as gone:
        core.read_namespaced_pod("p", "ns1")
    assert gone.value.status == 404


@pytest.mark.parametrize(
    "body, status", [(pod("p", node=None), None), (pod("p"), "Succeeded"), (pod("p", grace=0), None)]
)
def test_unscheduled_finished_or_zero_grace_pods_go_at_once(core, body: dict, status: str | None) -> None:
    core.create_namespaced_pod("ns1", body)
    if status:
        core.patch_namespaced_pod_status("p", "ns1", {"status": {"phase": status}})
    core.delete_namespaced_pod("p", "ns1")
    assert core.list_namespaced_pod("ns1").items == []


def test_a_uid_precondition_protects_a_recreated_pod(core) -> None:
    core.create_namespaced_pod("ns1", pod("p", node=None))
    with pytest.raises(kubernetes.client.ApiException) as refused:
        core.delete_namespaced_pod("p", "ns1", body={"preconditions": {"uid": "not-this-one"}})
    assert refused.value.status == 409 and "the UID in the precondition (not-this-one)" in str(refused.value.body)
    assert len(core.list_namespaced_pod("ns1").items) == 1


def test_finalizers_hold_an_object_and_none_may_be_added_while_it_is_deleted(core) -> None:
    core.create_namespaced_config_map("ns1", {"metadata": {"name": "c", "finalizers": ["x.io/keep"]}})
    core.delete_namespaced_config_map("c", "ns1")
    held = core.read_namespaced_config_map("c", "ns1")
    assert held.metadata.deletion_timestamp is not None
    with pytest.raises(kubernetes.client.ApiException) as refused:
        core.patch_namespaced_config_map("c", "ns1", {"metadata": {"finalizers": ["x.io/keep", "y.io/more"]}})
    assert refused.value.status == 422 and "no new finalizers can be added" in str(refused.value.body)
    core.patch_namespaced_config_map("c", "ns1", {"metadata": {"finalizers": None}})
    assert core.list_namespaced_config_map("ns1").items == []
