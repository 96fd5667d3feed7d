"""The operator's template policy, applied to the whole rendered Pod: what a job may ask of
the Pods the operator creates for it."""
from __future__ import annotations

import pathlib
from typing import Any

import pytest
import yaml

from ddpjob import render
from ddpjob.api import pod_security, spec, template_policy as tp
from ddpjob.cli.main import main

ROOT = pathlib.Path(__file__).resolve().parents[2]
T = "spec.template.spec"


def job(**fields: Any) -> spec.DDPJob:
    return spec.parse_job({"apiVersion": "ddpjob.io/v1alpha1", "kind": "DDPJob",
                           "metadata": {"name": "j", "namespace": "ns"}, "spec": {"image": "i", **fields}})


def template(pod_spec: dict | None = None, **metadata: Any) -> dict:
    return {"template": {"metadata": metadata, "spec": pod_spec or {}}}


def sidecar(**fields: Any) -> dict:
    return {"name": "side", "image": "s", **fields}


def sc(**fields: Any) -> dict:
    return {"securityContext": fields}


# (job fields, the field the error names, the allowance that lifts it): every field the
# trust-boundary review named, in every place of the Pod it can come from.
HOSTILE = {
    "checkpoint hostPath": ({"checkpoint": {"volume": {"hostPath": {"path": "/", "type": "Directory"}},
                                            "mountPath": "/host"}}, "spec.checkpoint.volume.hostPath", "hostPath"),
    "template hostPath": (template({"volumes": [{"name": "d", "emptyDir": {}}, {"name": "h", "hostPath": {"path": "/"}}]}),
                          f"{T}.volumes[1].hostPath", "hostPath"),
    "privileged trainer": (template({"containers": [{"name": "trainer", **sc(privileged=True)}]}),
                           f"{T}.containers[0].securityContext.privileged", "privileged"),
    "privileged sidecar": (template({"containers": [sidecar(**sc(privileged=True))]}),
                           f"{T}.containers[0].securityContext.privileged", "privileged"),
    "init capabilities": (template({"initContainers": [sidecar(**sc(capabilities={"add": ["SYS_ADMIN"]}))]}),
                          f"{T}.initContainers[0].securityContext.capabilities.add", "capabilities"),
    "ephemeral privileged": (template({"ephemeralContainers": [sidecar(**sc(privileged=True))]}),
                             f"{T}.ephemeralContainers[0].securityContext.privileged", "privileged"),
    "hostNetwork": (template({"hostNetwork": True}), f"{T}.hostNetwork", "hostNamespaces"),
    "hostPID": (template({"hostPID": True}), f"{T}.hostPID", "hostNamespaces"),
    "hostIPC": (template({"hostIPC": True}), f"{T}.hostIPC", "hostNamespaces"),
    "hostPort": (template({"containers": [{"name": "trainer", "ports": [{"containerPort": 80, "hostPort": 80}]}]}),
                 f"{T}.containers[0].ports[0].hostPort", "hostPorts"),
    "seLinux spc_t": (template({"securityContext": {"seLinuxOptions": {"type": "spc_t"}}}),
                      f"{T}.securityContext.seLinuxOptions.type", "seLinux"),
    "seLinux user": (template({"containers": [sidecar(**sc(seLinuxOptions={"user": "system_u"}))]}),
                     f"{T}.containers[0].securityContext.seLinuxOptions.user", "seLinux"),
    "windows hostProcess": (template({"securityContext": {"windowsOptions": {"hostProcess": True}}}),
                            f"{T}.securityContext.windowsOptions.hostProcess", "hostProcess"),
    "procMount Unmasked": (template({"containers": [sidecar(**sc(procMount="Unmasked"))]}),
                           f"{T}.containers[0].securityContext.procMount", "procMount"),
    "seccomp Unconfined pod": (template({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}),
                               f"{T}.securityContext.seccompProfile.type", "unconfined"),
    "seccomp Unconfined container": (template({"containers": [sidecar(**sc(seccompProfile={"type": "Unconfined"}))]}),
                                     f"{T}.containers[0].securityContext.seccompProfile.type", "unconfined"),
    "seccomp annotation": (template(annotations={"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}),
                           "spec.template.metadata.annotations[seccomp.security.alpha.kubernetes.io/pod]", "unconfined"),
    "AppArmor Unconfined": (template({"containers": [sidecar(**sc(appArmorProfile={"type": "Unconfined"}))]}),
                            f"{T}.containers[0].securityContext.appArmorProfile.type", "unconfined"),
    "AppArmor annotation": (template(annotations={"container.apparmor.security.beta.kubernetes.io/trainer": "unconfined"}),
                            "spec.template.metadata.annotations[container.apparmor.security.beta.kubernetes.io/trainer]",
                            "unconfined"),
    "unsafe sysctl": (template({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}}),
                      f"{T}.securityContext.sysctls[0].name", "sysctls"),
    "serviceAccountName": (template({"serviceAccountName": "admin"}), f"{T}.serviceAccountName", "serviceAccount"),
    "token automount": (template({"automountServiceAccountToken": True}), f"{T}.automountServiceAccountToken",
                        "serviceAccountToken"),
    "projected token": (template({"volumes": [{"name": "t", "projected": {"sources": [
        {"serviceAccountToken": {"audience": "vault", "path": "t"}}]}}]}),
        f"{T}.volumes[0].projected.sources[0].serviceAccountToken", "serviceAccountToken"),
    "projected token as checkpoint": ({"checkpoint": {"volume": {"projected": {"sources": [
        {"serviceAccountToken": {"path": "t"}}]}}}},
        "spec.checkpoint.volume.projected.sources[0].serviceAccountToken", "serviceAccountToken"),
    "nodeName": (template({"nodeName": "node-1"}), f"{T}.nodeName", "nodeName"),
    "tolerate all": (template({"tolerations": [{"key": "gpu", "operator": "Exists"}, {"operator": "Exists"}]}),
                     f"{T}.tolerations[1]", "tolerateAll"),
    "hostAliases": (template({"hostAliases": [{"ip": "10.0.0.1", "hostnames": ["kubernetes.default.svc"]}]}),
                    f"{T}.hostAliases", "hostAliases"),
    "kueue label": (template(labels={"kueue.x-k8s.io/queue-name": "other-team"}),
                    "spec.template.metadata.labels[kueue.x-k8s.io/queue-name]", "controllerLabels"),
    "volcano annotation": (template(annotations={"scheduling.volcano.sh/queue-name": "q"}),
                           "spec.template.metadata.annotations[scheduling.volcano.sh/queue-name]", "controllerLabels"),
    "coscheduling label": (template(labels={"scheduling.x-k8s.io/pod-group": "g"}),
                           "spec.template.metadata.labels[scheduling.x-k8s.io/pod-group]", "controllerLabels"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_refused_by_default_naming_the_field_and_allowed_by_an_admin(case: str) -> None:
    fields, path, allowance = HOSTILE[case]
    j = job(**fields)
    errors = tp.check(j, render.render_pod(j, 0))
    assert [e.path for e in errors] == [path]
    assert "refused by the operator's template policy" in errors[0].message
    assert f"templatePolicy.allow: [{allowance}]" in errors[0].message
    assert tp.check(j, render.render_pod(j, 0), frozenset({allowance})) == []


def test_every_allowance_is_exercised_by_the_table() -> None:
    assert {a for _, _, a in HOSTILE.values()} == set(tp.ALLOWANCES)


def test_the_reviewed_attack_is_refused_field_by_field() -> None:
    j = job(checkpoint={"volume": {"hostPath": {"path": "/", "type": "Directory"}}, "mountPath": "/host"},
            template={"spec": {"securityContext": {"runAsUser": 0, "runAsNonRoot": False}, "nodeName": "n1",
                               "tolerations": [{"operator": "Exists"}]}})
    assert [e.path for e in tp.check(j, render.render_pod(j, 0))] == [
        "spec.checkpoint.volume.hostPath", f"{T}.nodeName", f"{T}.tolerations[0]"]


@pytest.mark.parametrize("fields", [
    {},  # the operator's own Pod
    template({"securityContext": {"runAsUser": 0, "runAsNonRoot": False}}),  # root is baseline
    template({"securityContext": {"seccompProfile": {"type": "RuntimeDefault"},
                                  "sysctls": [{"name": "net.ipv4.tcp_keepalive_time", "value": "60"}]},
              "automountServiceAccountToken": False, "tolerations": [{"key": "gpu", "operator": "Exists"}]},
             labels={"team": "a"}, annotations={"container.apparmor.security.beta.kubernetes.io/trainer": "runtime/default"}),
    {"checkpoint": {"claimName": "ckpt"}},
    {"scheduling": {"gang": "kueue", "queue": "team-a"}},  # the operator's own kueue labels
    {"scheduling": {"gang": "coscheduling"}},
    {"scheduling": {"gang": "volcano"}},
])
def test_what_the_operator_sets_and_baseline_allows_passes(fields: dict) -> None:
    j = job(**fields)
    assert tp.check(j, render.render_pod(j, 0)) == []


def _example_jobs() -> list[spec.DDPJob]:
    docs = [d for f in sorted((ROOT / "manifests/examples").glob("*.yaml")) for d in yaml.safe_load_all(f.read_text())]
    return [spec.parse_job(d) for d in docs if d and d.get("kind") == "DDPJob"]


@pytest.mark.parametrize("gang", ["none", "kubernetes", "volcano", "coscheduling", "kueue"])
def test_every_examples_pods_pass_restricted_and_the_policy(gang: str) -> None:
    jobs = _example_jobs()
    assert jobs
    for j in jobs:
        scheduling = {"gang": gang, **({"queue": "q"} if gang == "kueue" else {})}
        j = spec.parse_job({"apiVersion": "ddpjob.io/v1alpha1", "kind": "DDPJob", "metadata": {"name": j.name},
                            "spec": {**yaml.safe_load(yaml.safe_dump(_spec_of(j))), "scheduling": scheduling}})
        for pod in (o for o in render.render(j) if o["kind"] == "Pod"):
            assert pod_security.violations("restricted", pod) == [], pod["metadata"]["name"]
            assert tp.check(j, pod) == []


def _spec_of(j: spec.DDPJob) -> dict:
    for f in (ROOT / "manifests/examples").glob("*.yaml"):
        for d in yaml.safe_load_all(f.read_text()):
            if d and d.get("metadata", {}).get("name") == j.name:
                return d["spec"]
    raise AssertionError(j.name)


def test_restricted_catches_what_baseline_lets_through() -> None:
    j = job(**template({"securityContext": {"runAsUser": 0}}))
    pod = render.render_pod(j, 0)
    assert pod_security.violations("baseline", pod) == []
    assert pod_security.violations("restricted", pod) == ["runAsUser=0 (pod must not set runAsUser=0)"]


def test_unknown_allowance_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown template allowance 'root'"):
        tp.parse_allowances("hostPath, root")
    assert tp.parse_allowances("hostPath, privileged") == {"hostPath", "privileged"}


def test_validate_refuses_the_checkpoint_host_path_with_one_line(tmp_path, capsys) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("apiVersion: ddpjob.io/v1alpha1\nkind: DDPJob\nmetadata: {name: j}\n"
                    "spec:\n  image: i\n  checkpoint: {volume: {hostPath: {path: /, type: Directory}}, mountPath: /host}\n")
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{path}: spec.checkpoint.volume.hostPath: a hostPath volume is refused")
    assert main(["validate", "--template-allow", "hostPath", str(path)]) == 0
    assert main(["validate", "--template-allow", "nope", str(path)]) == 1
    assert "unknown template allowance 'nope'" in capsys.readouterr().err
