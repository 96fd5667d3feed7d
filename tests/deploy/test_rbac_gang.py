"""The chart's PodGroup RBAC, both ways: a gang job's whole life on the real kube-apiserver
(which serves the native scheduling.k8s.io/v1beta1 PodGroup with the GenericWorkload gate,
on in the dev cluster) only makes requests the chart with `gang.kubernetes.enabled`
allows, and uses what it grants for PodGroups; a chart without an integration grants
nothing for its PodGroups."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from ddpjob_devcluster.clusters.operator_runner import wait_for
from tests.deploy.deploy_helpers import helm_template, require_tool
from tests.deploy.test_rbac import SCOPES, Grants, as_rendered, operator_requests, triple
from tests.operator.conftest import (  # noqa: F401 - fixtures, found by name
    Cluster,
    cluster,
    crd,
    ddpjob,
    kubeconfig,
    operator_identity,
    operator_kubeconfig,
    start_operator,
)
from tests.support.deadlines import REACTION

PODGROUPS = {("scheduling.k8s.io", "podgroups", verb) for verb in ("get", "create", "delete")}
# Kube.create reads a PodGroup back only when its create answers 409.
UNEXERCISED = {("scheduling.k8s.io", "podgroups", "get")}


@pytest.fixture
def gang_request_log(cluster: Cluster, start_operator: Any) -> list:  # noqa: F811 - the fixtures imported above
    start_operator()
    cluster.start_running(
        ddpjob("gang", nodes=2, ttlSecondsAfterFinished=0, restartPolicy="OnFailure", scheduling={"gang": "kubernetes"})
    )
    cluster.set_phase("gang", "Failed", ranks=[1], exit_code=137)
    cluster.run_gang("gang", 2, attempt=1)
    cluster.set_phase("gang", "Succeeded")
    wait_for(lambda: cluster.job("gang") is None, timeout=REACTION, message="the TTL did not delete the job")
    return as_rendered(cluster.requests, cluster.ns)


def test_podgroup_rbac_is_what_a_gang_job_uses(gang_request_log: list, tmp_path: pathlib.Path) -> None:
    helm = require_tool("helm", "run `make tools` (hack/fetch-tools.sh) or install helm")
    grants = Grants(helm_template(helm, tmp_path, {**SCOPES["namespace"], "gang": {"kubernetes": {"enabled": True}}}))
    requests = operator_requests(gang_request_log)
    used = {triple(r) for r in requests}
    assert ("scheduling.k8s.io", "podgroups", "create") in used, "the gang lifecycle made no PodGroup"
    denied = sorted({(triple(r), r.namespace) for r in requests if not grants.allows(r)})
    assert denied == []
    granted = {t for t in grants.all() if t[1] == "podgroups"}
    assert granted == PODGROUPS
    assert granted - used - UNEXERCISED == set()


@pytest.mark.parametrize(
    "gang, group",
    [
        ("kubernetes", "scheduling.k8s.io"),
        ("volcano", "scheduling.volcano.sh"),
        ("coscheduling", "scheduling.x-k8s.io"),
    ],
)
def test_podgroups_are_granted_only_for_enabled_integrations(gang, group, tmp_path: pathlib.Path) -> None:
    helm = require_tool("helm", "run `make tools` (hack/fetch-tools.sh) or install helm")
    for scope in SCOPES.values():
        off = Grants(helm_template(helm, tmp_path, scope))
        assert not {t for t in off.all() if t[1] == "podgroups"}
        on = Grants(
            helm_template(helm, tmp_path, {**scope, "gang": {gang: {"enabled": True}, "kueue": {"enabled": True}}})
        )
        assert {t for t in on.all() if t[1] == "podgroups"} == {
            (group, "podgroups", v) for v in ("get", "create", "delete")
        }


def test_events_are_listed_only_for_volcano(tmp_path: pathlib.Path) -> None:
    """Volcano's queue verdict is read from the Events on its PodGroup (api/gangs/volcano.py,
    read by operator/gang_reader.py)."""
    helm = require_tool("helm", "run `make tools` (hack/fetch-tools.sh) or install helm")
    for scope in SCOPES.values():
        for gang in ("kubernetes", "coscheduling", "volcano"):
            grants = Grants(helm_template(helm, tmp_path, {**scope, "gang": {gang: {"enabled": True}}}))
            assert (("", "events", "list") in grants.all()) == (gang == "volcano"), (gang, scope)


def test_kueue_workloads_are_readable_only_with_kueue_enabled(tmp_path: pathlib.Path) -> None:
    helm = require_tool("helm", "run `make tools` (hack/fetch-tools.sh) or install helm")
    for scope in SCOPES.values():
        off = Grants(helm_template(helm, tmp_path, {**scope, "gang": {"kubernetes": {"enabled": True}}}))
        assert not {t for t in off.all() if t[1] == "workloads"}
        on = Grants(helm_template(helm, tmp_path, {**scope, "gang": {"kueue": {"enabled": True}}}))
        # Only read: the operator GETs the Workload of a gated job (api/gangs/kueue.py).
        assert {t for t in on.all() if t[1] == "workloads"} == {("kueue.x-k8s.io", "workloads", "get")}
