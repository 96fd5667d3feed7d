"""The chart's RBAC is exactly what the operator uses.

The real operator (kopf over HTTP) runs one DDPJob through its whole life on the real
kube-apiserver -- created, Running, a gang restart, Succeeded, deleted by its TTL -- in
both watch scopes; the fault proxy in front of the server logs each of the operator's
requests with its RBAC verb (tests/operator/conftest.py). Then:
  * every request the operator made is allowed by the chart's rendered (Cluster)Role(s),
    with the scope rules of a real API server (a Role only covers its namespace; a
    cluster-wide list/watch or a cluster-scoped resource needs the ClusterRole);
  * every permission the chart grants was used, or is in UNEXERCISED with the code path
    that needs it (paths this lifecycle does not take).
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from ddpjob_devcluster.scenarios.api_requests import RecordedRequest
from tests.deploy.deploy_helpers import (
    RELEASE_NS,
    by_kind,
    helm_template,
    one,
    operator_objects,
    require_tool,
    rule_triples,
)

# The operator tests' fixtures: the test's namespace on the real API server, the CRD, the
# real operator behind the request-logging proxy, and the lifecycle (pytest finds them
# here by name; the arguments that name them again are F811's).
from tests.operator.conftest import (  # noqa: F401
    Cluster,
    cluster,
    crd,
    kubeconfig,
    lifecycle_request_log,
    operator_identity,
    operator_kubeconfig,
    start_operator,
)

# The namespace the chart is rendered for; the operator's requests in the test's own
# namespace are checked as made there (`as_rendered`).
JOB_NS = "default"

# Requests in the log that are the test harness's, not the operator's: the test creates
# the CRD and the DDPJob; the kubelet stand-in writes Pod status.
HARNESS = {
    ("apiextensions.k8s.io", "customresourcedefinitions", "create"),
    ("ddpjob.io", "ddpjobs", "create"),
    ("", "pods/status", "patch"),
}

# Granted but not used by this lifecycle, each with the code that needs it.
UNEXERCISED = {
    # ddpjob.operator.kube.Kube.create reads a Pod back when its create answers 409.
    ("", "pods", "get"),
    # ... and a Service, to check it is the job's own (refusals.not_owned).
    ("", "services", "get"),
    # spec.tensorboard (operator/tensorboard.py; tests/operator/test_tensorboard_operator.py
    # and tests/system/test_tensorboard_real.py take these paths): its Deployment created,
    # read back on a 409, and with its Service deleted when the field is turned off.
    ("apps", "deployments", "create"),
    ("apps", "deployments", "get"),
    ("apps", "deployments", "delete"),
    ("", "services", "delete"),
    # ... and its NetworkPolicy, created before the Deployment and read back on a 409.
    ("networking.k8s.io", "networkpolicies", "create"),
    ("networking.k8s.io", "networkpolicies", "get"),
    # StatusWriter._conflict reads the DDPJob back when a status write answers 409: only
    # when kopf's annotation patch races the write, which this lifecycle may or may not hit.
    ("ddpjob.io", "ddpjobs", "get"),
    # Not a request: OwnerReferencesPermissionEnforcement checks it when a Pod with
    # blockOwnerDeletion is created, not a request RBAC logs.
    ("ddpjob.io", "ddpjobs/finalizers", "update"),
    # Leader election (operator/leader_election.py) is not part of the lifecycle run (its
    # operator is kopf alone, in a thread): tests/system/test_leader_election_real.py runs two
    # replicas with the chart's ServiceAccount on a real API server, which checks these.
    ("coordination.k8s.io", "leases", "create"),
    ("coordination.k8s.io", "leases", "get"),
    ("coordination.k8s.io", "leases", "update"),
}

SCOPES = {
    "cluster": {"watch": {"scope": "cluster"}},
    "namespace": {"watch": {"scope": "namespace", "namespace": JOB_NS}},
}


@pytest.fixture(params=list(SCOPES))
def scope(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def operator(start_operator: Any, cluster: Cluster, scope: str) -> Any:  # noqa: F811 - overrides tests/operator's: both scopes
    return start_operator(namespace=None if scope == "cluster" else cluster.ns)


def as_rendered(log: list[RecordedRequest], namespace: str) -> list[RecordedRequest]:
    """The requests in the test's `namespace` as if made in JOB_NS, the chart's."""
    return [r._replace(namespace=JOB_NS) if r.namespace == namespace else r for r in log]


class Grants:
    """What a rendered chart allows: ClusterRole rules everywhere, Role rules in one namespace."""

    def __init__(self, objects: list[dict[str, Any]]):
        objects = operator_objects(objects)
        self.cluster = set().union(*(rule_triples(r["rules"]) for r in by_kind(objects, "ClusterRole")))
        self.namespaced: dict[str, set[tuple[str, str, str]]] = {}
        for role in by_kind(objects, "Role"):  # the watched namespace's, the leader election's
            self.namespaced.setdefault(role["metadata"]["namespace"], set()).update(rule_triples(role["rules"]))
        bindings = by_kind(objects, "ClusterRoleBinding") + by_kind(objects, "RoleBinding")
        sa = one(objects, "ServiceAccount")["metadata"]["name"]
        for binding in bindings:  # every role is bound to the operator's ServiceAccount
            assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": RELEASE_NS}]
        assert len(bindings) == len(by_kind(objects, "ClusterRole")) + len(by_kind(objects, "Role"))

    def allows(self, r: RecordedRequest) -> bool:
        t = triple(r)
        return t in self.cluster or (r.namespace is not None and t in self.namespaced.get(r.namespace, set()))

    def all(self) -> set[tuple[str, str, str]]:
        return self.cluster.union(*self.namespaced.values())


def triple(r: RecordedRequest) -> tuple[str, str, str]:
    return r.group, f"{r.resource}/{r.subresource}" if r.subresource else r.resource, r.verb


def operator_requests(log: list[RecordedRequest]) -> list[RecordedRequest]:
    return [r for r in log if triple(r) not in HARNESS]


def test_rbac_is_exactly_what_the_operator_uses(
    lifecycle_request_log: list[RecordedRequest],  # noqa: F811 - the fixture imported above
    cluster: Cluster,  # noqa: F811 - the fixture imported above
    scope: str,
    tmp_path: pathlib.Path,
) -> None:
    helm = require_tool("helm", "run `make tools` (hack/fetch-tools.sh) or install helm")
    grants = Grants(helm_template(helm, tmp_path, SCOPES[scope]))
    requests = operator_requests(as_rendered(lifecycle_request_log, cluster.ns))
    assert any(r.resource == "pods" and r.verb == "create" for r in requests), "the lifecycle did not run"

    denied = sorted({(triple(r), r.namespace) for r in requests if not grants.allows(r)})
    assert denied == [], f"the operator made requests the {scope}-scoped chart does not allow"

    used = {triple(r) for r in requests}
    unused = grants.all() - used - UNEXERCISED
    assert unused == set(), f"granted but never used by the operator ({scope} scope): {sorted(unused)}"


def test_the_check_catches_a_missing_and_an_extra_grant(tmp_path: pathlib.Path) -> None:
    helm = require_tool("helm", "run `make tools` (hack/fetch-tools.sh) or install helm")
    objects = helm_template(helm, tmp_path, SCOPES["cluster"])
    rules = one(operator_objects(objects), "ClusterRole")["rules"]
    pods = next(r for r in rules if r["resources"] == ["pods"])
    pods["verbs"] = [v for v in pods["verbs"] if v != "delete"] + ["patch"]
    grants = Grants(objects)
    delete = RecordedRequest("delete", "", "v1", "pods", None, JOB_NS, "j-0")
    assert not grants.allows(delete)
    assert ("", "pods", "patch") in grants.all()
    # a Role covers its own namespace only, and never a cluster-wide list
    objects = helm_template(helm, tmp_path, SCOPES["namespace"])
    grants = Grants(objects)
    assert grants.allows(RecordedRequest("create", "", "v1", "pods", None, JOB_NS, "j-0"))
    assert not grants.allows(RecordedRequest("create", "", "v1", "pods", None, "other", "j-0"))
    assert not grants.allows(RecordedRequest("list", "", "v1", "pods", None, None, None))
