"""The Helm chart: lint, render with the default and the namespace-scoped values, every
object strictly schema-valid, the CRD copy, values schema, comments, security, names."""

from __future__ import annotations

import json
import pathlib
import re
import shutil

import kubernetes_validate
import pytest
import yaml

from ddpjob import version
from ddpjob.api.spec import parse_job, validate
from tests.deploy.deploy_helpers import (
    CHART,
    CRD_DIR,
    NAMESPACE_VALUES,
    RELEASE,
    RELEASE_NS,
    by_kind,
    crd_copy_differences,
    helm_template,
    helm_template_run,
    one,
    operator_objects,
    require_tool,
    rule_triples,
    run,
)

K8S_VERSION = "1.37.0"  # kubernetes-validate's newest schemas; the chart's kubeVersion is >=1.29
# Kinds from CRDs that kubernetes-validate has no schema for; checked by hand below.
CUSTOM_KINDS = {"ServiceMonitor"}

VALUE_SETS = {
    "default": None,
    "namespace-scoped": NAMESPACE_VALUES,
    "namespace-scoped+standalone": {**NAMESPACE_VALUES, "leaderElection": {"enabled": False}, "replicaCount": 1},
    "cluster+servicemonitor": {"replicaCount": 3, "metrics": {"serviceMonitor": {"enabled": True}}},
    "no-metrics": {"metrics": {"enabled": False}},
}


@pytest.fixture(scope="module")
def helm() -> str:
    return require_tool("helm", "run `make tools` (hack/fetch-tools.sh) or install helm")


def validate_strictly(obj: dict) -> None:
    try:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        raise AssertionError(f"{obj['kind']}/{obj['metadata']['name']}: {exc.message} at {list(exc.path)}") from exc


def test_helm_lint(helm: str, tmp_path: pathlib.Path) -> None:
    run([helm, "lint", "--strict", str(CHART)])
    vfile = tmp_path / "ns.yaml"
    vfile.write_text(yaml.safe_dump(NAMESPACE_VALUES))
    run([helm, "lint", "--strict", str(CHART), "--values", str(vfile)])


@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=VALUE_SETS.keys())
def test_every_rendered_object_is_strictly_valid(helm: str, tmp_path: pathlib.Path, values: dict | None) -> None:
    objects = helm_template(helm, tmp_path, values, include_crds=True)
    assert {"CustomResourceDefinition", "Deployment", "ServiceAccount", "ClusterRole"} <= {o["kind"] for o in objects}
    for obj in objects:
        if obj["kind"] in CUSTOM_KINDS:
            assert obj["apiVersion"] == "monitoring.coreos.com/v1" and obj["metadata"]["name"]
            continue
        validate_strictly(obj)


def test_strict_validation_can_fail(helm: str, tmp_path: pathlib.Path) -> None:
    deployment = one(helm_template(helm, tmp_path), "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGett"] = {}
    with pytest.raises(AssertionError, match="httpGett"):
        validate_strictly(deployment)


# ---- the CRD copy ----------------------------------------------------------------

CHART_CRDS = CHART / "files" / "crds"


def test_chart_crds_are_an_exact_copy_of_manifests_crd() -> None:
    assert crd_copy_differences(CRD_DIR, CHART_CRDS) == [], (
        "charts/ddpjob-operator/files/crds/ must equal manifests/crd/: run hack/sync-crds.sh"
    )
    # Helm installs crds/ once and never upgrades it: the CRD must not be there.
    assert not (CHART / "crds").exists()


def test_crd_copy_check_catches_a_modified_a_missing_and_an_extra_file(tmp_path: pathlib.Path) -> None:
    copy = tmp_path / "crds"
    shutil.copytree(CHART_CRDS, copy)
    (name,) = [p.name for p in CRD_DIR.glob("*.yaml")]
    (copy / name).write_text((copy / name).read_text().replace("minimum: 1", "minimum: 2", 1) + "\n")
    (copy / "stray.yaml").write_text("{}\n")
    problems = crd_copy_differences(CRD_DIR, copy)
    assert problems == [f"{name}: differs from {CRD_DIR / name}", f"stray.yaml: in {copy} but not in {CRD_DIR}"]
    (copy / name).unlink()
    assert f"{name}: missing from {copy}" in crd_copy_differences(CRD_DIR, copy)


# ---- values: schema and comments -------------------------------------------------


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"imagee": {"tag": "x"}}, "additional properties 'imagee' not allowed"),
        ({"image": {"tgа": "x"}}, "additional properties"),  # noqa: RUF001 - a Cyrillic a, on purpose
        ({"watch": {"scope": "namespaced"}}, "value must be one of"),
        ({"replicaCount": 2, "leaderElection": {"enabled": False}}, "maximum"),  # two standalone operators would fight
        ({"leaderElection": {"enabled": "yes"}}, "boolean"),
        ({"leaderElection": {"leaseDuration": 1}}, "minimum"),
        (
            {"leaderElection": {"renewDeadline": 10}},
            "leaderElection.renewDeadline must be below leaderElection.leaseDuration",
        ),
        ({"leaderElection": {"retryPeriod": 6}}, "leaderElection.retryPeriod: 1.2 x it must be below"),
        ({"peering": {"enabled": True}}, "additional properties 'peering' not allowed"),
        ({"podDisruptionBudget": {"maxUnavailable": 0}}, "minimum"),
        ({"podDisruptionBudget": {"maxUnavailable": "half"}}, "maxUnavailable"),
        ({"spreadOverNodes": "yes"}, "boolean"),
        ({"metrics": {"port": 70000}}, "maximum"),
        ({"probes": {"liveness": {"periodSecond": 5}}}, "additional properties"),
    ],
)
def test_values_schema_rejects_typos_and_bad_values(helm: str, tmp_path: pathlib.Path, bad: dict, message: str) -> None:
    done = helm_template_run(helm, tmp_path, bad, check=False)
    assert done.returncode != 0, f"{bad} was accepted"
    assert message in done.stderr, done.stderr


def values_keys_without_comment(text: str, opaque: tuple[str, ...]) -> list[str]:
    """Dotted paths of keys in a values.yaml that have no `#` comment line right above
    them, except keys inside `opaque` blocks (Kubernetes types the block's comment covers)."""
    missing: list[str] = []
    stack: list[tuple[int, str]] = []  # (indent, key)
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^( *)([A-Za-z0-9_]+):", line)
        if not m:
            continue
        indent, key = len(m.group(1)), m.group(2)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([k for _, k in stack] + [key])
        stack.append((indent, key))
        if any(path.startswith(o + ".") for o in opaque):
            continue
        above = lines[i - 1].strip() if i else ""
        if not above.startswith("#"):
            missing.append(path)
    return missing


OPAQUE_VALUES = (
    "resources",
    "podSecurityContext",
    "securityContext",
    "probes.liveness",
    "probes.readiness",
    "tensorboard.resources",
    "tolerations",
)


def test_every_values_key_has_a_comment() -> None:
    assert values_keys_without_comment((CHART / "values.yaml").read_text(), OPAQUE_VALUES) == []


def test_comment_check_finds_an_uncommented_key() -> None:
    text = "# -- top\na:\n  # -- b\n  b: 1\n  c: 2\nresources:\n  limits: {}\n"
    assert values_keys_without_comment(text, ("resources",)) == ["a.c", "resources"]


def test_every_values_key_is_in_the_schema() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def walk(v: dict, s: dict, path: str) -> None:
        for key, sub in v.items():
            assert key in s.get("properties", {}), f"{path}{key} is not in values.schema.json"
            props = s["properties"][key]
            props = schema["definitions"][props["$ref"].rsplit("/", 1)[1]] if "$ref" in props else props
            if isinstance(sub, dict) and "properties" in props:
                walk(sub, props, f"{path}{key}.")

    walk(values, schema, "")


# ---- the Deployment --------------------------------------------------------------


def test_deployment_is_restricted_and_probes_the_liveness_endpoint(helm: str, tmp_path: pathlib.Path) -> None:
    objects = helm_template(helm, tmp_path)
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = c["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]
    # kopf's liveness endpoint, on the port the operator is told to serve it on
    for probe in ("livenessProbe", "readinessProbe"):
        assert c[probe]["httpGet"] == {"path": "/healthz", "port": "healthz"}
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert f"--liveness=http://0.0.0.0:{ports['healthz']:d}/healthz" in c["args"]
    assert f"--metrics-port={ports['metrics']:d}" in c["args"]
    assert c["command"] == ["ddpjob", "operator"]
    # the read-only root FS needs a writable HOME/TMPDIR
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["HOME"] == env["TMPDIR"] == "/tmp" and mounts["/tmp"] == "tmp"
    assert {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}} in pod["volumes"]
    assert c["image"] == "ddpjob/operator:" + yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]


def test_the_replicas_elect_a_leader_on_a_lease_and_roll_and_standalone_recreates(
    helm: str, tmp_path: pathlib.Path
) -> None:
    objects = helm_template(helm, tmp_path)
    elected = one(objects, "Deployment")
    assert elected["spec"]["strategy"]["type"] == "RollingUpdate"
    (c,) = elected["spec"]["template"]["spec"]["containers"]
    assert "--standalone" not in c["args"] and not any(a.startswith("--peering") for a in c["args"])
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}
    # The Lease is named like the Deployment, in the Pod's own namespace (the downward API).
    assert env["DDPJOB_LEADER_ELECTION_LEASE"] == elected["metadata"]["name"]
    assert env["DDPJOB_LEADER_ELECTION_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["POD_ID"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["POD_UID"] == {"fieldRef": {"fieldPath": "metadata.uid"}}
    timings = {
        k: env[f"DDPJOB_LEADER_ELECTION_{k}"]
        for k in ("LEASE_SECONDS", "RENEW_DEADLINE_SECONDS", "RETRY_PERIOD_SECONDS")
    }
    assert timings == {"LEASE_SECONDS": "10", "RENEW_DEADLINE_SECONDS": "7", "RETRY_PERIOD_SECONDS": "2"}
    # What the chart renders is what the operator's settings accept.
    from ddpjob.operator import settings

    config = settings.from_env(
        {k: v for k, v in env.items() if isinstance(v, str)} | {"DDPJOB_LEADER_ELECTION_NAMESPACE": RELEASE_NS}
    ).leader_election
    assert config == settings.LeaderElection(RELEASE_NS, elected["metadata"]["name"], 10, 7, 2)
    # Only this Lease, in the release's namespace: created, read and updated.
    role = next(r for r in by_kind(objects, "Role") if r["metadata"]["name"].endswith("-leader-election"))
    assert role["metadata"]["namespace"] == RELEASE_NS
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [elected["metadata"]["name"]],
            "verbs": ["get", "update"],
        },
    ]
    binding = next(b for b in by_kind(objects, "RoleBinding") if b["metadata"]["name"] == role["metadata"]["name"])
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"][0]["name"] == one(objects, "ServiceAccount")["metadata"]["name"]

    objects = helm_template(helm, tmp_path, {"leaderElection": {"enabled": False}, "replicaCount": 1})
    standalone = one(objects, "Deployment")
    assert standalone["spec"]["strategy"] == {"type": "Recreate"} and standalone["spec"]["replicas"] == 1
    (c,) = standalone["spec"]["template"]["spec"]["containers"]
    assert "--standalone" in c["args"] and not any(e["name"].startswith("DDPJOB_LEADER") for e in c["env"])
    assert not by_kind(objects, "Role")


def test_the_defaults_keep_a_standby_on_another_node_through_node_loss_drains_and_upgrades(
    helm: str, tmp_path: pathlib.Path
) -> None:
    objects = helm_template(helm, tmp_path)
    deployment = one(objects, "Deployment")
    spec, pod = deployment["spec"], deployment["spec"]["template"]["spec"]
    selector = spec["selector"]["matchLabels"]
    assert spec["replicas"] == 2
    assert spec["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    # Spread over nodes, softly: one node still runs both.
    (term,) = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"] == {
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {"matchLabels": selector},
    }
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in pod["affinity"]["podAntiAffinity"]
    # Bound to a silent node for 10 s, not Kubernetes' 300.
    assert sorted((t["key"], t["effect"], t["tolerationSeconds"]) for t in pod["tolerations"]) == [
        ("node.kubernetes.io/not-ready", "NoExecute", 10),
        ("node.kubernetes.io/unreachable", "NoExecute", 10),
    ]
    budget = one(objects, "PodDisruptionBudget")
    assert budget["spec"] == {
        "maxUnavailable": 1,
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
        "selector": {"matchLabels": selector},
    }
    assert budget["metadata"]["namespace"] == RELEASE_NS


def test_the_spread_and_the_budget_can_be_turned_off_and_a_users_affinity_is_kept(
    helm: str, tmp_path: pathlib.Path
) -> None:
    objects = helm_template(helm, tmp_path, {"spreadOverNodes": False, "podDisruptionBudget": {"enabled": False}})
    assert "affinity" not in one(objects, "Deployment")["spec"]["template"]["spec"]
    assert not by_kind(objects, "PodDisruptionBudget")
    node_affinity = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["system"]}]}]
        }
    }
    affinity = one(helm_template(helm, tmp_path, {"affinity": {"nodeAffinity": node_affinity}}), "Deployment")["spec"][
        "template"
    ]["spec"]["affinity"]
    assert affinity["nodeAffinity"] == node_affinity and "podAntiAffinity" in affinity
    own = {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "topology.kubernetes.io/zone", "labelSelector": {"matchLabels": {"a": "b"}}}
        ]
    }
    affinity = one(helm_template(helm, tmp_path, {"affinity": {"podAntiAffinity": own}}), "Deployment")["spec"][
        "template"
    ]["spec"]["affinity"]
    assert affinity == {"podAntiAffinity": own}
    budget = one(
        helm_template(helm, tmp_path, {"podDisruptionBudget": {"maxUnavailable": "50%"}}), "PodDisruptionBudget"
    )
    assert budget["spec"]["maxUnavailable"] == "50%"


def test_scope_flags(helm: str, tmp_path: pathlib.Path) -> None:
    args = one(helm_template(helm, tmp_path), "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--all-namespaces" in args
    objects = helm_template(helm, tmp_path, NAMESPACE_VALUES)
    args = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--namespace=team-a" in args and "--all-namespaces" not in args


# ---- RBAC shape (what the operator actually calls: test_rbac.py) ------------------


def test_cluster_scope_grants_one_clusterrole(helm: str, tmp_path: pathlib.Path) -> None:
    objects = helm_template(helm, tmp_path)
    # Besides the leader election's Role in the release's namespace (above).
    assert [r["metadata"]["name"] for r in by_kind(objects, "Role") + by_kind(objects, "RoleBinding")] == [
        "ddpjob-ddpjob-operator-leader-election"
    ] * 2
    role, binding = one(operator_objects(objects), "ClusterRole"), one(objects, "ClusterRoleBinding")
    sa = one(objects, "ServiceAccount")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": RELEASE_NS}]
    triples = rule_triples(role["rules"])
    assert ("", "pods", "create") in triples and ("", "namespaces", "list") not in triples


def test_namespace_scope_grants_a_role_in_that_namespace_only(helm: str, tmp_path: pathlib.Path) -> None:
    objects = helm_template(helm, tmp_path, NAMESPACE_VALUES)
    role, binding = (
        next(o for o in by_kind(objects, kind) if not o["metadata"]["name"].endswith("-leader-election"))
        for kind in ("Role", "RoleBinding")
    )
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "team-a"
    assert binding["subjects"][0]["namespace"] == RELEASE_NS
    assert ("", "pods", "create") in rule_triples(role["rules"])
    # The ClusterRole keeps only cluster-scoped reads: nothing about pods, jobs or writes.
    cluster = rule_triples(one(operator_objects(objects), "ClusterRole")["rules"])
    assert {g for g, _, _ in cluster} <= {"", "apiextensions.k8s.io"}
    assert {r for _, r, _ in cluster} == {"customresourcedefinitions", "namespaces", "nodes"}
    assert {v for _, _, v in cluster} == {"list", "watch"}  # the Nodes its Pods run on are watched


def test_every_rbac_rule_says_why() -> None:
    text = (CHART / "templates" / "rbac.yaml").read_text()
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("- apiGroups:"):
            above = lines[i - 1].strip()
            if above.startswith("{{"):  # a rule inside an `if`: the comment is above the if
                above = lines[i - 2].strip()
            assert above.startswith("#"), f"rbac.yaml line {i + 1}: a rule without a reason"


# ---- names, NOTES, optional objects ----------------------------------------------


def test_names_are_truncated_to_63_characters(helm: str, tmp_path: pathlib.Path) -> None:
    release = "r" * 53  # Helm's own limit on release names
    objects = helm_template(helm, tmp_path, release=release)
    for obj in objects:
        assert len(obj["metadata"]["name"]) <= 63 and not obj["metadata"]["name"].endswith("-"), obj["metadata"]["name"]
        for value in obj["metadata"].get("labels", {}).values():
            assert len(value) <= 63
    assert one(objects, "Deployment")["metadata"]["name"] == (release + "-ddpjob-operator")[:63].rstrip("-")
    objects = helm_template(helm, tmp_path, {"fullnameOverride": "ops"}, release="x")
    assert one(objects, "Deployment")["metadata"]["name"] == "ops"


def test_servicemonitor_is_optional(helm: str, tmp_path: pathlib.Path) -> None:
    assert not by_kind(helm_template(helm, tmp_path), "ServiceMonitor")
    objects = helm_template(
        helm, tmp_path, {"metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "kp"}}}}
    )
    sm, svc = one(objects, "ServiceMonitor"), one(objects, "Service")
    assert sm["metadata"]["labels"]["release"] == "kp"
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert sm["spec"]["endpoints"][0]["port"] == svc["spec"]["ports"][0]["name"] == "metrics"
    assert not by_kind(helm_template(helm, tmp_path, {"metrics": {"enabled": False}}), "Service")


def notes_job(helm: str, *sets: str) -> tuple[str, dict]:
    args = [a for s in sets for a in ("--set", s)]
    done = run([helm, "install", "ddpjob", str(CHART), "--dry-run=client", "--namespace", RELEASE_NS, *args])
    notes = done.stdout.split("NOTES:", 1)[1]
    job = yaml.safe_load(notes.split("<<'YAML' | kubectl apply -f -", 1)[1].split("YAML", 1)[0].replace("\n   ", "\n"))
    return notes, job


def test_notes_say_how_to_submit_a_first_job(helm: str) -> None:
    notes, job = notes_job(helm, "trainer.cpuImage=example/trainer:1-cpu")
    assert job["kind"] == "DDPJob" and job["spec"]["image"] == "example/trainer:1-cpu"
    assert "kubectl wait ddpjob/first-job --for=condition=Succeeded" in notes
    assert validate(job) == []


def test_notes_use_the_cpu_image_on_cpu_and_the_cuda_image_for_gpus(helm: str) -> None:
    _, cpu = notes_job(helm)
    assert cpu["spec"]["image"] == version.trainer_image("cpu") and cpu["spec"]["backend"] == "gloo"
    assert "gpusPerNode" not in cpu["spec"]
    _, gpu = notes_job(helm, "trainer.gpusPerNode=4")
    assert gpu["spec"]["image"] == version.trainer_image("cuda") and gpu["spec"]["backend"] == "nccl"
    assert gpu["spec"]["gpusPerNode"] == 4 and parse_job(gpu).nproc_per_node == 4
    assert validate(gpu) == []


def test_chart_metadata() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["kubeVersion"] and chart["appVersion"] == version.__version__
    for key in ("home", "sources", "icon", "maintainers", "keywords", "description"):
        assert chart.get(key), f"Chart.yaml has no {key}"
    # The icon URL names a file of this repository: it must exist.
    assert chart["icon"].endswith("/main/docs/icon.svg") and (CHART.parents[1] / "docs" / "icon.svg").is_file()
    annotations = chart["annotations"]
    assert annotations["artifacthub.io/license"] == "Apache-2.0"
    assert {
        "artifacthub.io/crds",
        "artifacthub.io/images",
        "artifacthub.io/links",
        "artifacthub.io/crdsExamples",
    } <= annotations.keys()
    for example in yaml.safe_load(annotations["artifacthub.io/crdsExamples"]):
        assert validate(example) == []


# ---- CRD upgrades ----------------------------------------------------------------


def rendered_crd(helm: str, tmp_path: pathlib.Path, values: dict | None = None, upgrade: bool = False) -> list[dict]:
    cmd = [helm, "template", RELEASE, str(CHART), "--namespace", RELEASE_NS, *(["--is-upgrade"] if upgrade else [])]
    if values:
        vfile = tmp_path / "crd-values.yaml"
        vfile.write_text(yaml.safe_dump(values))
        cmd += ["--values", str(vfile)]
    return by_kind([d for d in yaml.safe_load_all(run(cmd).stdout) if d], "CustomResourceDefinition")


def test_an_upgrade_renders_the_crd_with_the_new_schema(helm: str, tmp_path: pathlib.Path) -> None:
    """`helm upgrade` applies what the templates render: the CRD must be among them (crds/
    is never upgraded), with exactly the schema of manifests/crd/ -- the fields this
    release added included -- and kept on uninstall."""
    (crd,) = rendered_crd(helm, tmp_path, upgrade=True)
    source = yaml.safe_load((CRD_DIR / "ddpjobs.ddpjob.io.yaml").read_text())
    assert crd["spec"] == source["spec"] and crd["metadata"]["name"] == source["metadata"]["name"]
    status = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert {"nprocPerNode", "backend", "worldSize"} <= status.keys()  # new in 0.2.0
    assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    assert crd["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    validate_strictly(crd)


def test_the_crd_follows_its_source_when_the_schema_changes(helm: str, tmp_path: pathlib.Path) -> None:
    """A schema change in files/crds/ (what hack/sync-crds.sh copies) is what an upgrade applies."""
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    path = chart / "files" / "crds" / "ddpjobs.ddpjob.io.yaml"
    body = yaml.safe_load(path.read_text())
    props = body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    props["newField"] = {"type": "string", "description": "a field of a later release"}
    path.write_text(yaml.safe_dump(body))
    out = run([helm, "template", RELEASE, str(chart), "--namespace", RELEASE_NS, "--is-upgrade"]).stdout
    (crd,) = by_kind([d for d in yaml.safe_load_all(out) if d], "CustomResourceDefinition")
    assert crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["newField"]


def test_crd_install_and_keep_can_be_turned_off(helm: str, tmp_path: pathlib.Path) -> None:
    assert rendered_crd(helm, tmp_path, {"crds": {"install": False}}) == []
    (crd,) = rendered_crd(helm, tmp_path, {"crds": {"keep": False}})
    assert "annotations" not in crd["metadata"]


def test_the_crd_is_not_in_the_all_category() -> None:
    source = yaml.safe_load((CRD_DIR / "ddpjobs.ddpjob.io.yaml").read_text())
    assert "all" not in source["spec"]["names"].get("categories", [])
    columns = {c["name"]: c for c in source["spec"]["versions"][0]["additionalPrinterColumns"]}
    assert columns["Procs"] == {"name": "Procs", "type": "integer", "jsonPath": ".status.nprocPerNode"}
    assert columns["World"]["jsonPath"] == ".status.worldSize"


def test_every_value_the_e2e_script_sets_exists() -> None:
    """hack/e2e-kind.sh cannot run here; a renamed value would fail its `helm install` there."""
    script = (CHART.parents[1] / "hack" / "e2e-kind.sh").read_text()
    schema = json.loads((CHART / "values.schema.json").read_text())
    keys = re.findall(r"--set ([\w.]+)=", script)
    assert "trainer.cpuImage" in keys
    for key in keys:
        node = schema
        for part in key.split("."):
            assert part in node.get("properties", {}), f"hack/e2e-kind.sh sets {key}, which the chart has no value for"
            node = node["properties"][part]
            node = schema["definitions"][node["$ref"].rsplit("/", 1)[1]] if "$ref" in node else node


def test_the_network_policy_lets_the_operator_reach_the_api_server_and_progress_ports_only(
    helm: str, tmp_path: pathlib.Path
) -> None:
    policy = one(helm_template(helm, tmp_path, {}), "NetworkPolicy")
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    egress = policy["spec"]["egress"]
    ports = sorted((p["port"], p["protocol"]) for rule in egress for p in rule["ports"])
    assert ports == [(53, "TCP"), (53, "UDP"), (443, "TCP"), (6443, "TCP"), (29510, "TCP")]
    progress = next(r for r in egress if r["ports"][0]["port"] == 29510)
    assert progress["to"][0]["podSelector"]["matchExpressions"] == [{"key": "ddpjob.io/job-name", "operator": "Exists"}]
    pinned = one(
        helm_template(helm, tmp_path, {"networkPolicy": {"apiServer": {"cidrs": ["10.0.0.10/32"]}, "dns": False}}),
        "NetworkPolicy",
    )
    api = next(r for r in pinned["spec"]["egress"] if r["ports"][0]["port"] == 443)
    assert api["to"] == [{"ipBlock": {"cidr": "10.0.0.10/32"}}] and len(pinned["spec"]["egress"]) == 2
    assert by_kind(helm_template(helm, tmp_path, {"networkPolicy": {"enabled": False}}), "NetworkPolicy") == []


def test_ddpjobs_are_aggregated_into_the_default_user_roles(helm: str, tmp_path: pathlib.Path) -> None:
    objects = helm_template(helm, tmp_path, {})
    aggregated = [o for o in by_kind(objects, "ClusterRole") if o not in operator_objects(objects)]
    labels = {
        o["metadata"]["name"]: {k for k, v in o["metadata"]["labels"].items() if "aggregate-to" in k}
        for o in aggregated
    }
    assert labels == {
        "ddpjob-ddpjob-operator-edit": {
            "rbac.authorization.k8s.io/aggregate-to-admin",
            "rbac.authorization.k8s.io/aggregate-to-edit",
        },
        "ddpjob-ddpjob-operator-view": {"rbac.authorization.k8s.io/aggregate-to-view"},
    }
    view = next(o for o in aggregated if o["metadata"]["name"].endswith("-view"))
    assert {v for rule in view["rules"] for v in rule["verbs"]} == {"get", "list", "watch"}
    assert by_kind(
        operator_objects(helm_template(helm, tmp_path, {"rbac": {"aggregateToDefaultRoles": False}})), "ClusterRole"
    ) == by_kind(helm_template(helm, tmp_path, {"rbac": {"aggregateToDefaultRoles": False}}), "ClusterRole")


def test_the_notice_key_is_a_secret_drawn_per_install_and_read_by_the_operator(
    helm: str, tmp_path: pathlib.Path
) -> None:
    """The key the operator signs its notices to elastic Pods with comes from a Secret the
    chart draws (and keeps across upgrades through `lookup`, which `helm template` cannot
    show): two installs draw two keys, each one the operator's settings accept."""
    import base64

    from ddpjob.operator import settings

    keys = []
    for _ in range(2):
        objects = helm_template(helm, tmp_path)
        secret = next(o for o in objects if o["kind"] == "Secret" and o["metadata"]["name"].endswith("-notice-key"))
        key = base64.b64decode(secret["data"]["key"]).decode()
        assert len(key) == 64 and key.isalnum()
        assert settings.from_env({settings.NOTICE_KEY_ENV: key}).notice_key == key.encode()
        (c,) = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
        ref = next(e for e in c["env"] if e["name"] == settings.NOTICE_KEY_ENV)["valueFrom"]["secretKeyRef"]
        assert ref == {"name": secret["metadata"]["name"], "key": "key", "optional": True}
        keys.append(key)
    assert keys[0] != keys[1]
