"""The development cluster says no the way a real API server does: Pod validation (422),
Pod Security Admission (403), ResourceQuota (403), CRD schema + CEL (422/400).

Messages are compared with the upstream texts recorded in the admission modules."""

from __future__ import annotations

import json
import pathlib
import urllib.error
import urllib.request
from typing import Any

import kubernetes
import pytest
import yaml

from ddpjob import render
from ddpjob.api import spec
from ddpjob_devcluster.apiserver.admission import podsecurity, podvalidation, quota

ROOT = pathlib.Path(__file__).resolve().parents[3]
CRD = yaml.safe_load((ROOT / "manifests" / "crd" / "ddpjobs.ddpjob.io.yaml").read_text())
JOB: dict[str, Any] = {
    "apiVersion": "ddpjob.io/v1alpha1",
    "kind": "DDPJob",
    "metadata": {"name": "j", "namespace": "ns1"},
    "spec": {"image": "img", "nodes": 2},
}


def pod(name: str = "p", **container) -> dict:
    container.setdefault("image", "img")
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", **container}]}}


def post(emulator, path: str, body: dict, query: str = "") -> tuple[int, dict]:
    """A raw POST, as kubectl sends it (the typed client would refuse some bodies itself)."""
    request = urllib.request.Request(
        f"{emulator.url}{path}{query}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def refused(call, *args) -> tuple[int, dict]:
    with pytest.raises(kubernetes.client.ApiException) as exc:
        call(*args)
    return exc.value.status, json.loads(str(exc.value.body))


# ---- Pod validation ------------------------------------------------------------------


@pytest.mark.parametrize(
    "body, expected",
    [
        ({"metadata": {"name": "p"}, "spec": {}}, "spec.containers: Required value"),
        (pod(image=""), "spec.containers[0].image: Required value"),
        (pod("Bad_Name"), 'metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain'),
        (
            pod(resources={"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}),
            'spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1',
        ),
        (
            pod(resources={"requests": {"nvidia.com/gpu": "1"}}),
            "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources",
        ),
        (
            pod(resources={"requests": {"cpu": "-1"}}),
            'spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0',
        ),
        (
            pod(volumeMounts=[{"name": "data", "mountPath": "/d"}]),
            'spec.containers[0].volumeMounts[0].name: Not found: "data"',
        ),
    ],
)
def test_pod_validation_refuses_with_422(core, emulator, body: dict, expected: str) -> None:
    status, st = post(emulator, "/api/v1/namespaces/ns1/pods", body)
    assert status == 422 and st["reason"] == "Invalid"
    assert st["message"].startswith(f'Pod "{body["metadata"]["name"]}" is invalid: ') and expected in st["message"]
    assert core.list_namespaced_pod("ns1").items == []


def test_several_pod_errors_are_one_bracketed_aggregate() -> None:
    body = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}], "restartPolicy": "Foo"}}
    assert podvalidation.errors(body) == [
        "spec.containers[0].image: Required value",
        'spec.restartPolicy: Unsupported value: "Foo": supported values: "Always", "OnFailure", "Never"',
    ]


def test_the_operators_rendered_pod_is_valid() -> None:
    job = spec.parse_job({**JOB, "spec": {**JOB["spec"], "gpusPerNode": 2}})
    assert podvalidation.errors(render.render_pod(job, 0)) == []


# ---- Pod Security Admission ----------------------------------------------------------


def _namespace(core, name: str, level: str) -> None:
    core.create_namespace({"metadata": {"name": name, "labels": {podsecurity.ENFORCE: level}}})


def test_restricted_namespace_refuses_a_bare_pod_with_the_upstream_message(core) -> None:
    _namespace(core, "locked", "restricted")
    status, st = refused(core.create_namespaced_pod, "locked", pod("w-0"))
    assert status == 403 and st["reason"] == "Forbidden"
    assert st["message"] == (
        'pods "w-0" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false '
        '(container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities '
        '(container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or '
        'container "c" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must '
        'set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")'
    )


def test_baseline_namespace_refuses_host_path_and_privileged(core) -> None:
    _namespace(core, "base", "baseline")
    body = pod(securityContext={"privileged": True})
    body["spec"]["volumes"] = [{"name": "data", "hostPath": {"path": "/x"}}]
    status, st = refused(core.create_namespaced_pod, "base", body)
    assert status == 403 and 'violates PodSecurity "baseline:latest"' in st["message"]
    assert 'hostPath volumes (volume "data")' in st["message"]
    assert 'privileged (container "c" must not set securityContext.privileged=true)' in st["message"]
    core.create_namespaced_pod("base", pod("fine"))  # baseline lets a plain Pod in


def test_unlabelled_namespace_is_privileged(core) -> None:
    """No pod-security label: the `privileged` level, as the real admission defaults it.
    A privileged container is admitted and stored as asked."""
    assert podsecurity.violations("privileged", pod(securityContext={"privileged": True})["spec"]) == []
    created = core.create_namespaced_pod("ns1", pod(securityContext={"privileged": True}))
    stored = core.read_namespaced_pod(created.metadata.name, "ns1")
    assert stored.spec.containers[0].security_context.privileged is True
    # The same Pod where the namespace asks for baseline is refused: the default is what let it in.
    _namespace(core, "labelled", "baseline")
    status, body = refused(core.create_namespaced_pod, "labelled", pod("again", securityContext={"privileged": True}))
    assert status == 403 and "privileged" in body["message"]


def test_the_operators_rendered_pod_passes_restricted() -> None:
    job = spec.parse_job({**JOB, "spec": {**JOB["spec"], "checkpoint": {"claimName": "ckpt"}}})
    assert podsecurity.violations("restricted", render.render_pod(job, 0)["spec"]) == []


# ---- ResourceQuota -------------------------------------------------------------------


def test_pod_count_quota_refuses_the_second_pod(core) -> None:
    core.create_namespaced_resource_quota("ns1", {"metadata": {"name": "q"}, "spec": {"hard": {"pods": "1"}}})
    core.create_namespaced_pod("ns1", pod("a"))
    status, st = refused(core.create_namespaced_pod, "ns1", pod("b"))
    assert status == 403 and st["reason"] == "Forbidden" and st["details"] == {"name": "b", "kind": "pods"}
    assert st["message"] == (
        'pods "b" is forbidden: exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1'
    )
    # A finished Pod no longer counts (QuotaV1Pod), and raising the quota lets the next in.
    core.patch_namespaced_pod_status("a", "ns1", {"status": {"phase": "Succeeded"}})
    core.create_namespaced_pod("ns1", pod("b"))
    core.patch_namespaced_resource_quota("q", "ns1", {"spec": {"hard": {"pods": "3"}}})
    core.create_namespaced_pod("ns1", pod("c"))
    # The quota controller's status, for `kubectl describe quota`: b and c count, a finished.
    st = core.read_namespaced_resource_quota("q", "ns1").status
    assert st.hard == {"pods": "3"} and st.used == {"pods": "2"}


def test_gpu_request_quota_lists_only_the_exceeded_resource(core) -> None:
    hard = {"requests.nvidia.com/gpu": "4", "pods": "10"}
    core.create_namespaced_resource_quota("ns1", {"metadata": {"name": "gpu-q"}, "spec": {"hard": hard}})
    gpus = {"limits": {"nvidia.com/gpu": "8"}}
    _status, st = refused(core.create_namespaced_pod, "ns1", pod("w-0", resources=gpus))
    assert st["message"] == (
        'pods "w-0" is forbidden: exceeded quota: gpu-q, requested: requests.nvidia.com/gpu=8, '
        "used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=4"
    )


def test_cpu_quota_requires_pods_to_specify_cpu() -> None:
    q = {"metadata": {"name": "q"}, "spec": {"hard": {"limits.cpu": "4", "limits.memory": "1Gi"}}}
    with pytest.raises(Exception) as exc:
        quota.admit([q], [], pod("w-0"))
    assert str(exc.value) == 'pods "w-0" is forbidden: failed quota: q: must specify limits.cpu,limits.memory'


def test_quantities_print_like_the_api_server() -> None:
    from decimal import Decimal

    assert [quota.fmt(Decimal(x)) for x in ("1", "0.5", "1073741824")] == ["1", "500m", "1Gi"]


# ---- custom resources against their CRD ------------------------------------------------


@pytest.fixture
def ddpjobs(api, custom):
    kubernetes.client.ApiextensionsV1Api(api).create_custom_resource_definition(CRD)
    return custom


def test_a_valid_job_is_stored_with_the_schemas_defaults(ddpjobs) -> None:
    stored = ddpjobs.create_namespaced_custom_object("ddpjob.io", "v1alpha1", "ns1", "ddpjobs", JOB)
    assert stored["spec"]["restartPolicy"] == "OnFailure" and stored["spec"]["port"] == 29500


def test_schema_and_cel_errors_are_422_naming_the_field(ddpjobs) -> None:
    body = {**JOB, "spec": {"image": "img", "nodes": 0, "backend": "nccl"}}
    status, st = refused(ddpjobs.create_namespaced_custom_object, "ddpjob.io", "v1alpha1", "ns1", "ddpjobs", body)
    assert status == 422 and st["reason"] == "Invalid"
    assert st["message"].startswith('DDPJob.ddpjob.io "j" is invalid: ') and "spec.nodes" in st["message"]


def test_transition_rules_run_on_update(ddpjobs) -> None:
    ddpjobs.create_namespaced_custom_object("ddpjob.io", "v1alpha1", "ns1", "ddpjobs", JOB)
    status, st = refused(
        ddpjobs.patch_namespaced_custom_object, "ddpjob.io", "v1alpha1", "ns1", "ddpjobs", "j", {"spec": {"nodes": 3}}
    )
    assert status == 422 and "spec.nodes" in st["message"]
    ddpjobs.patch_namespaced_custom_object("ddpjob.io", "v1alpha1", "ns1", "ddpjobs", "j", {"spec": {"suspend": True}})


def test_unknown_fields_are_pruned_unless_strict(ddpjobs, emulator) -> None:
    body = {**JOB, "spec": {**JOB["spec"], "bogus": 1}}
    stored = ddpjobs.create_namespaced_custom_object("ddpjob.io", "v1alpha1", "ns1", "ddpjobs", body)
    assert "bogus" not in stored["spec"]
    strict = {**body, "metadata": {"name": "k", "namespace": "ns1"}}
    status, st = post(emulator, "/apis/ddpjob.io/v1alpha1/namespaces/ns1/ddpjobs", strict, "?fieldValidation=Strict")
    assert status == 400 and 'strict decoding error: unknown field "spec.bogus"' in st["message"]


@pytest.mark.parametrize(
    "field, value", [("activeDeadlineSeconds", 100000000000000), ("ttlSecondsAfterFinished", 31536001)]
)
def test_a_duration_nobody_could_mean_is_refused_by_the_api_server(ddpjobs, field: str, value: int) -> None:
    body = {**JOB, "spec": {**JOB["spec"], field: value}}
    status, st = refused(ddpjobs.create_namespaced_custom_object, "ddpjob.io", "v1alpha1", "ns1", "ddpjobs", body)
    assert status == 422 and f"spec.{field}" in st["message"]


def test_an_object_stored_under_older_rules_can_still_be_annotated(ddpjobs, emulator) -> None:
    from kmock._internal import references

    bad = {**JOB, "spec": {**JOB["spec"], "nodes": 0}}
    emulator.store.create(references.resource("ddpjob.io/v1alpha1/ddpjobs"), "ns1", bad)
    # Ratcheting: the unchanged invalid field does not block a metadata change ...
    ddpjobs.patch_namespaced_custom_object(
        "ddpjob.io", "v1alpha1", "ns1", "ddpjobs", "j", {"metadata": {"annotations": {"a": "b"}}}
    )
    # ... but changing it to another invalid value is refused.
    status, st = refused(
        ddpjobs.patch_namespaced_custom_object, "ddpjob.io", "v1alpha1", "ns1", "ddpjobs", "j", {"spec": {"nodes": -1}}
    )
    assert status == 422 and "spec.nodes" in st["message"]
