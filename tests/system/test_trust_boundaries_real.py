"""The trust boundaries of docs/threat-model.md on the real control plane, with the chart's
RBAC and admission policy: a "pod-maker" user (create and patch DDPJobs, create Pods and
Services, read Pods, logs and Events; no Secrets) and an "edit" user (the default `edit`
role), as tests/support/cluster_users.py makes them. Who may take a job's names and write
what decides its life: tests/system/test_job_metadata_real.py.

- The API server refuses a job that refers to a Secret or ConfigMap its author may not
  get, in every place a job can name one; `edit` users keep what they had.
- One hostile object (nested 2,000 levels, or a spec over 256 KiB) ends neither the
  operator nor anyone else's job.
- What joins another's gang or reaches the node (schedulingGroup, a probe's host) is
  refused by the operator's template policy.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import kubernetes
import pytest

from ddpjob_devcluster.clusters.client import json_object, wait_until
from ddpjob_devcluster.clusters.real import RealCluster
from tests.support.cluster_users import POD_MAKER, as_user, bind, job, wait_for_edit_to_include_ddpjobs
from tests.support.deadlines import CLUSTER_TEST, PHASE, REACTION

pytestmark = [pytest.mark.slow, pytest.mark.timeout(CLUSTER_TEST)]

POLICY = "ddpjob-author-rights"


# Each place a job can name a Secret (or a ConfigMap), and the name it names there.
def trainer(**fields: Any) -> dict[str, Any]:
    return {"template": {"spec": {"containers": [{"name": "trainer", **fields}]}}}


REFERENCES: list[tuple[str, dict[str, Any], str]] = [
    (
        "secret-volume",
        {"template": {"spec": {"volumes": [{"name": "t", "secret": {"secretName": "admin-token"}}]}}},
        "Secret admin-token",
    ),
    (
        "env-secret-key",
        {"env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "admin-token", "key": "token"}}}]},
        "Secret admin-token",
    ),
    ("template-env-from", trainer(envFrom=[{"secretRef": {"name": "admin-token"}}]), "Secret admin-token"),
    (
        "projected-secret",
        {
            "template": {
                "spec": {"volumes": [{"name": "p", "projected": {"sources": [{"secret": {"name": "admin-token"}}]}}]}
            }
        },
        "Secret admin-token",
    ),
    (
        "checkpoint-volume",
        {"checkpoint": {"volume": {"secret": {"secretName": "admin-token"}}, "mountPath": "/c"}},
        "Secret admin-token",
    ),
    (
        "image-pull-secret",
        {"template": {"spec": {"imagePullSecrets": [{"name": "admin-token"}]}}},
        "Secret admin-token",
    ),
    (
        "sidecar-secret-env",
        {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "side",
                            "image": "busybox",
                            "env": [
                                {"name": "T", "valueFrom": {"secretKeyRef": {"name": "admin-token", "key": "token"}}}
                            ],
                        }
                    ]
                }
            }
        },
        "Secret admin-token",
    ),
    (
        "configmap-volume",
        {"template": {"spec": {"volumes": [{"name": "c", "configMap": {"name": "team-config"}}]}}},
        "ConfigMap team-config",
    ),
    (
        "env-configmap-key",
        {"env": [{"name": "C", "valueFrom": {"configMapKeyRef": {"name": "team-config", "key": "k"}}}]},
        "ConfigMap team-config",
    ),
]


def test_a_job_only_user_cannot_make_a_job_use_what_they_may_not_read_and_edit_users_keep_it(
    cluster: RealCluster, tmp_path: pathlib.Path
) -> None:
    cluster.core.create_namespaced_secret(
        cluster.namespace,
        {"metadata": {"name": "admin-token"}, "stringData": {"token": "root-of-everything"}},  # type: ignore[arg-type]  # a dict body: the client sends it as it is
    )
    cluster.core.create_namespaced_config_map(
        cluster.namespace,
        {"metadata": {"name": "team-config"}, "data": {"k": "v"}},  # type: ignore[arg-type]  # a dict body: the client sends it as it is
    )
    mallory, alice = bind(cluster, "mallory", POD_MAKER), bind(cluster, "alice", "edit")
    wait_for_edit_to_include_ddpjobs(cluster, alice)

    for case, spec, named in REFERENCES:
        refused = as_user(cluster, mallory, tmp_path, "create", job(f"m-{case}", **spec))
        assert refused.returncode != 0, f"{case}: the pod-maker's job was stored"
        assert f"refers to {named}, which mallory may not get in namespace {cluster.namespace}" in refused.stderr, (
            case,
            refused.stderr,
        )
        assert POLICY in refused.stderr
    assert (
        json_object(
            cluster.custom.list_namespaced_custom_object("ddpjob.io", "v1alpha1", cluster.namespace, "ddpjobs")
        )["items"]
        == []
    )

    # The same jobs by an `edit` user (who may read the Secret anyway) are stored, and run.
    for case, spec, _ in REFERENCES:
        done = as_user(cluster, alice, tmp_path, "create", job(f"a-{case}", **spec))
        assert done.returncode == 0, (case, done.stderr)
    pods = wait_until(lambda: cluster.pods("a-secret-volume"), PHASE, "the edit user's job got no Pod")
    volumes = pods[0]["spec"]["volumes"]
    assert {"name": "t", "secret": {"secretName": "admin-token", "defaultMode": 420}} in volumes

    # The pod-maker may not change the edit user's job (its template could print the
    # Secret into a log they may read), but may do what does not touch the spec.
    patched = cluster.kubectl(
        f"--kubeconfig={mallory}",
        "patch",
        "ddpj",
        "a-env-secret-key",
        "-n",
        cluster.namespace,
        "--type=merge",
        "-p",
        '{"spec":{"suspend":true}}',
        check=False,
    )
    assert patched.returncode != 0 and "which mallory may not get" in patched.stderr, patched.stderr
    labelled = cluster.kubectl(
        f"--kubeconfig={mallory}",
        "patch",
        "ddpj",
        "a-env-secret-key",
        "-n",
        cluster.namespace,
        "--type=merge",
        "-p",
        '{"metadata":{"labels":{"seen":"yes"}}}',
        check=False,
    )
    assert labelled.returncode == 0, labelled.stderr

    # And a job that names nothing of the namespace's is the pod-maker's to run.
    assert as_user(cluster, mallory, tmp_path, "create", job("m-plain")).returncode == 0
    cluster.wait_phase("m-plain", "Succeeded", timeout=PHASE)


def test_a_user_allowed_one_secret_by_name_may_use_that_one_only(cluster: RealCluster, tmp_path: pathlib.Path) -> None:
    for name in ("wandb-key", "other-key"):
        cluster.core.create_namespaced_secret(
            cluster.namespace,
            {"metadata": {"name": name}, "stringData": {"key": "x"}},  # type: ignore[arg-type]  # a dict body: the client sends it as it is
        )
    carol = bind(
        cluster,
        "carol",
        {
            "rules": [
                *POD_MAKER["rules"],
                {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["wandb-key"], "verbs": ["get"]},
            ]
        },
    )
    env = [{"name": "WANDB_API_KEY", "valueFrom": {"secretKeyRef": {"name": "wandb-key", "key": "key"}}}]
    assert as_user(cluster, carol, tmp_path, "create", job("c-own", env=env)).returncode == 0
    other = [{"name": "K", "valueFrom": {"secretKeyRef": {"name": "other-key", "key": "key"}}}]
    refused = as_user(cluster, carol, tmp_path, "create", job("c-other", env=env + other))
    assert refused.returncode != 0 and "refers to Secret other-key, which carol may not get" in refused.stderr


def test_the_api_server_refuses_a_spec_nested_deeper_than_32_levels(cluster: RealCluster) -> None:
    # The policy type-checks against the CRD's schema: no warning on any expression.
    admission = kubernetes.client.AdmissionregistrationV1Api(cluster.api)
    checked = wait_until(
        lambda: admission.read_validating_admission_policy(POLICY).status,
        REACTION,
        "the API server did not type-check the policy",
    )
    assert not (checked.type_checking and checked.type_checking.expression_warnings), checked.type_checking
    deep: dict[str, Any] = {}
    for _ in range(40):
        deep = {"a": deep}
    with pytest.raises(kubernetes.client.ApiException) as refused:
        cluster.create_job(job("deep", template={"metadata": {"annotations": {}}, "spec": {"x": deep}}))
    assert refused.value.status == 422 and "nested deeper than 32 levels" in str(refused.value.body)


def test_one_deep_or_huge_job_ends_neither_the_operator_nor_anyone_elses_job(cluster: RealCluster) -> None:
    """Stored as they would be without the chart's admission policy (before Kubernetes 1.35,
    `authorPolicy.enabled: false`, or stored before it was installed): the operator decodes
    them, refuses each once, and goes on with every other job."""
    admission = kubernetes.client.AdmissionregistrationV1Api(cluster.api)
    admission.delete_validating_admission_policy_binding(POLICY)  # the next cluster's install puts it back
    wait_until(lambda: _stored_despite_policy(cluster), REACTION, "the policy still refused the deep job")
    cluster.create_job(job("huge", args=["x" * 1000] * 300))  # 300 KiB: kopf's copy cannot be an annotation
    cluster.create_job(job("bystander", nodes=2))
    assert cluster.wait_phase("bystander", "Succeeded", timeout=PHASE)["restarts"] == 0
    # Read with kubectl: this process's decoder stops at 1,000 levels.
    deep = wait_until(
        lambda: (
            (st := json.loads(cluster.kubectl("get", "ddpj", "deep", "-o", "jsonpath={.status}").stdout or "{}")).get(
                "phase"
            )
            == "Failed"
            and st
        ),
        PHASE,
        "the deep job was not refused",
    )
    assert "spec.template: is nested deeper than 32 levels" in deep["message"]
    huge = cluster.wait_phase("huge", "Failed", timeout=PHASE)
    assert "spec: is 29" in huge["message"] and "at most 100 KiB" in huge["message"]
    assert cluster.pods("deep") == [] and cluster.pods("huge") == []
    op = cluster.operator
    assert op is not None  # started
    assert op.alive and not op.exits, op.log_tail()  # never ended, not even to be restarted
    # kopf's bookkeeping patch of the huge job (a digest: 300 KiB is no annotation) written once, and the Event said.
    wait_until(
        lambda: (
            "ddpjob.io/digest" in json.dumps((cluster.job("huge") or {})["metadata"].get("annotations") or {})
            and any(e["reason"] == "InvalidSpec" for e in cluster.events("huge"))
        ),
        PHASE,
        "no bookkeeping of huge",
    )
    assert [e["reason"] for e in cluster.events("huge") if e["reason"] == "InvalidSpec"] == ["InvalidSpec"]
    assert "Too long" not in op.log_tail(400)
    annotations = (
        json_object(
            cluster.custom.get_namespaced_custom_object("ddpjob.io", "v1alpha1", cluster.namespace, "ddpjobs", "huge")
        )["metadata"].get("annotations")
        or {}
    )
    assert "ddpjob.io/digest" in annotations.get("ddpjob.io/last-handled-configuration", "")


def _stored_despite_policy(cluster: RealCluster) -> bool:
    """kubectl sends the 2,000 levels (this process's own encoder would need a higher
    recursion limit): once the binding's deletion has reached the API server's cache."""
    body = json.dumps(job("deep", template={"spec": {"x": "DEEP"}}))
    path = cluster.workdir / "deep.json"
    path.write_text(body.replace('"DEEP"', '{"a":' * 2000 + "{}" + "}" * 2000))
    done = cluster.kubectl("create", "-n", cluster.namespace, "-f", str(path), check=False)
    if done.returncode != 0 and "nested deeper" in done.stderr:
        return False
    assert done.returncode == 0, done.stderr
    return True


def test_fields_that_join_anothers_gang_or_reach_from_the_node_are_refused(cluster: RealCluster) -> None:
    template = {
        "spec": {
            "schedulingGroup": {"podGroupName": "someone-elses-attempt-0"},
            "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}],
            "priorityClassName": "system-node-critical",
            "containers": [
                {
                    "name": "trainer",
                    "livenessProbe": {"httpGet": {"host": "169.254.169.254", "port": 80}},
                    "lifecycle": {"preStop": {"httpGet": {"host": "127.0.0.1", "port": 10250}}},
                }
            ],
        }
    }
    cluster.create_job(job("joiner", template=template))
    st = cluster.wait_phase("joiner", "Failed", timeout=PHASE)
    for path in (
        "spec.template.spec.schedulingGroup",
        "spec.template.spec.tolerations[0]",
        "spec.template.spec.priorityClassName",
        "spec.template.spec.containers[0].livenessProbe.httpGet.host",
        "spec.template.spec.containers[0].lifecycle.preStop.httpGet.host",
    ):
        assert path in st["message"], (path, st["message"])
    assert cluster.pods("joiner") == []


def test_a_cluster_wide_operator_creates_nothing_in_the_system_namespaces(
    request: pytest.FixtureRequest, tmp_path: pathlib.Path
) -> None:
    """The ClusterRole covers kube-system too; the chart's namespace guard (admission) does not
    let the operator's ServiceAccount create a Pod there, while it runs jobs elsewhere."""
    from tests.support.control_plane import real_cluster

    with real_cluster(request, tmp_path / "cluster", scope="cluster") as wide:
        body = {**job("intruder"), "metadata": {"name": "intruder", "namespace": "kube-system"}}
        wide.create_job(body)
        try:
            st = wait_until(
                lambda: (s := wide.status("intruder", "kube-system")) and "does not act" in s.get("message", "") and s,
                PHASE,
                "the job in kube-system was not refused",
                lambda: wide.status("intruder", "kube-system"),
            )
            assert "the ddpjob operator does not act in namespace kube-system" in st["message"]
            assert wide.pods("intruder", "kube-system") == []
        finally:
            wide.custom.delete_namespaced_custom_object("ddpjob.io", "v1alpha1", "kube-system", "ddpjobs", "intruder")
        wide.create_job(job("elsewhere"))
        assert wide.wait_phase("elsewhere", "Succeeded", timeout=PHASE)["restarts"] == 0
