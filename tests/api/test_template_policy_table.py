"""Every field a DDPJob's author could use to get more than a Pod of their own, refused by
default with one error naming the field and the allowance that would let it through,
and let through when (and only when) that allowance is given."""

from __future__ import annotations

import pathlib
import re

import pytest

from ddpjob.api import spec, template_policy

# (what the template adds, the error's field path, the allowance)
CASES = [
    ({"spec": {"hostNetwork": True}}, "spec.template.spec.hostNetwork", "hostNamespaces"),
    ({"spec": {"hostPID": True}}, "spec.template.spec.hostPID", "hostNamespaces"),
    (
        {"spec": {"volumes": [{"name": "h", "hostPath": {"path": "/"}}]}},
        "spec.template.spec.volumes[0].hostPath",
        "hostPath",
    ),
    (
        {"spec": {"containers": [{"name": "trainer", "securityContext": {"privileged": True}}]}},
        "spec.template.spec.containers[0].securityContext.privileged",
        "privileged",
    ),
    (
        {"spec": {"initContainers": [{"name": "i", "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}]}},
        "spec.template.spec.initContainers[0].securityContext.capabilities.add",
        "capabilities",
    ),
    (
        {"spec": {"containers": [{"name": "sidecar", "ports": [{"containerPort": 80, "hostPort": 80}]}]}},
        "spec.template.spec.containers[0].ports[0].hostPort",
        "hostPorts",
    ),
    (
        {"spec": {"securityContext": {"seLinuxOptions": {"type": "spc_t"}}}},
        "spec.template.spec.securityContext.seLinuxOptions.type",
        "seLinux",
    ),
    (
        {"spec": {"containers": [{"name": "trainer", "securityContext": {"windowsOptions": {"hostProcess": True}}}]}},
        "spec.template.spec.containers[0].securityContext.windowsOptions.hostProcess",
        "hostProcess",
    ),
    (
        {"spec": {"ephemeralContainers": [{"name": "e", "securityContext": {"procMount": "Unmasked"}}]}},
        "spec.template.spec.ephemeralContainers[0].securityContext.procMount",
        "procMount",
    ),
    (
        {"spec": {"securityContext": {"seccompProfile": {"type": "Unconfined"}}}},
        "spec.template.spec.securityContext.seccompProfile.type",
        "unconfinedProfiles",
    ),
    (
        {"spec": {"containers": [{"name": "trainer", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}}]}},
        "spec.template.spec.containers[0].securityContext.appArmorProfile.type",
        "unconfinedProfiles",
    ),
    (
        {"metadata": {"annotations": {"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}}},
        "spec.template.metadata.annotations[seccomp.security.alpha.kubernetes.io/pod]",
        "unconfinedProfiles",
    ),
    (
        {"metadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/trainer": "unconfined"}}},
        "spec.template.metadata.annotations[container.apparmor.security.beta.kubernetes.io/trainer]",
        "unconfinedProfiles",
    ),
    (
        {"spec": {"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}}},
        "spec.template.spec.securityContext.sysctls[0]",
        "sysctls",
    ),
    ({"spec": {"serviceAccountName": "admin"}}, "spec.template.spec.serviceAccountName", "serviceAccount"),
    (
        {"spec": {"automountServiceAccountToken": True}},
        "spec.template.spec.automountServiceAccountToken",
        "serviceAccount",
    ),
    (
        {
            "spec": {
                "volumes": [{"name": "t", "projected": {"sources": [{"serviceAccountToken": {"audience": "vault"}}]}}]
            }
        },
        "spec.template.spec.volumes[0].projected.sources[0].serviceAccountToken",
        "serviceAccount",
    ),
    ({"spec": {"nodeName": "node-7"}}, "spec.template.spec.nodeName", "nodeName"),
    ({"spec": {"tolerations": [{"operator": "Exists"}]}}, "spec.template.spec.tolerations[0]", "tolerateAll"),
    (
        {"spec": {"hostAliases": [{"ip": "10.0.0.9", "hostnames": ["kubernetes.default.svc"]}]}},
        "spec.template.spec.hostAliases",
        "hostAliases",
    ),
    (
        {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "someone-elses"}}},
        "spec.template.metadata.labels[kueue.x-k8s.io/queue-name]",
        "controllerLabels",
    ),
    # With a port named `http`, a training Pod so labelled joined that job's TensorBoard Service.
    (
        {"metadata": {"labels": {"ddpjob.io/tensorboard-for": "another-job"}}},
        "spec.template.metadata.labels[ddpjob.io/tensorboard-for]",
        "controllerLabels",
    ),
    # Kubernetes 1.34+ baseline: a probe or handler host makes the kubelet connect there from the node.
    (
        {
            "spec": {
                "containers": [
                    {"name": "trainer", "livenessProbe": {"httpGet": {"host": "169.254.169.254", "port": 80}}}
                ]
            }
        },
        "spec.template.spec.containers[0].livenessProbe.httpGet.host",
        "probeHosts",
    ),
    (
        {
            "spec": {
                "initContainers": [{"name": "i", "readinessProbe": {"tcpSocket": {"host": "127.0.0.1", "port": 10250}}}]
            }
        },
        "spec.template.spec.initContainers[0].readinessProbe.tcpSocket.host",
        "probeHosts",
    ),
    (
        {
            "spec": {
                "containers": [
                    {"name": "trainer", "lifecycle": {"preStop": {"httpGet": {"host": "10.0.0.1", "port": 443}}}}
                ]
            }
        },
        "spec.template.spec.containers[0].lifecycle.preStop.httpGet.host",
        "probeHosts",
    ),
    (
        {"spec": {"containers": [{"name": "trainer", "securityContext": {"appArmorProfile": {"type": "Localhostt"}}}]}},
        "spec.template.spec.containers[0].securityContext.appArmorProfile.type",
        "unconfinedProfiles",
    ),
    (
        {
            "spec": {
                "volumes": [
                    {
                        "name": "c",
                        "projected": {
                            "sources": [
                                {
                                    "podCertificate": {
                                        "signerName": "example.com/s",
                                        "keyType": "ED25519",
                                        "credentialBundlePath": "c",
                                    }
                                }
                            ]
                        },
                    }
                ]
            }
        },
        "spec.template.spec.volumes[0].projected.sources[0].podCertificate",
        "serviceAccount",
    ),
    (
        {
            "spec": {
                "tolerations": [
                    {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}
                ]
            }
        },
        "spec.template.spec.tolerations[0]",
        "tolerateAll",
    ),
    # Fields that join another's gang or claim, as the controllers' labels do.
    (
        {"spec": {"schedulingGroup": {"podGroupName": "someone-elses-attempt-0"}}},
        "spec.template.spec.schedulingGroup",
        "controllerLabels",
    ),
    (
        {"spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "someone-elses-gpus"}]}},
        "spec.template.spec.resourceClaims[0].resourceClaimName",
        "controllerLabels",
    ),
    (
        {"spec": {"evictionResponders": [{"name": "example.com/keeper", "priority": 10000}]}},
        "spec.template.spec.evictionResponders",
        "controllerLabels",
    ),
    ({"spec": {"priorityClassName": "system-node-critical"}}, "spec.template.spec.priorityClassName", "systemPriority"),
    # Volcano's group annotation: with schedulerName volcano, the Pods would join that gang.
    (
        {
            "metadata": {"annotations": {"scheduling.k8s.io/group-name": "other-job-attempt-0"}},
            "spec": {"schedulerName": "volcano"},
        },
        "spec.template.metadata.annotations[scheduling.k8s.io/group-name]",
        "controllerLabels",
    ),
]


def job(template=None, **extra) -> spec.DDPJob:
    body = {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {"name": "j"},
        "spec": {"nodes": 1, "image": "img", **({"template": template} if template else {}), **extra},
    }
    return spec.parse_job(body)


@pytest.mark.parametrize("template,path,allowance", CASES, ids=[c[1].rsplit(".", 1)[-1] + "-" + c[2] for c in CASES])
def test_each_item_is_refused_by_default_and_allowed_only_by_its_allowance(template, path, allowance) -> None:
    errors = template_policy.check_job(job(template))
    assert [e.path for e in errors] == [path], [str(e) for e in errors]
    assert f"templatePolicy.allow: [{allowance}]" in errors[0].message
    others = frozenset(template_policy.ALLOWANCES) - {allowance}
    assert [e.path for e in template_policy.check_job(job(template), others)] == [path]
    assert template_policy.check_job(job(template), frozenset({allowance})) == []


def test_a_csi_inline_volume_is_refused_in_the_template_and_as_the_checkpoint_volume() -> None:
    """Only its nodePublishSecretRef is checked against the author (the admission policy); a
    secrets-store driver's secretProviderClass names Secrets by another path (issue 40, low 5)."""
    csi = {
        "driver": "secrets-store.csi.k8s.io",
        "readOnly": True,
        "volumeAttributes": {"secretProviderClass": "another-teams-vault"},
    }
    errors = template_policy.check_job(job({"spec": {"volumes": [{"name": "s", "csi": csi}]}}))
    assert [str(e) for e in errors] == [
        "spec.template.spec.volumes[0].csi: a CSI inline volume (its driver's attributes are unchecked) is refused "
        "by the operator's template policy (an admin can allow it: templatePolicy.allow: [csiVolumes])"
    ]
    as_checkpoint = job(checkpoint={"volume": {"csi": csi}, "mountPath": "/ckpt"})
    assert [e.path for e in template_policy.check_job(as_checkpoint)] == ["spec.checkpoint.volume.csi"]
    assert template_policy.check_job(as_checkpoint, frozenset({"csiVolumes"})) == []


def test_the_checkpoint_volume_is_held_to_the_same_policy() -> None:
    hostile = job(checkpoint={"volume": {"hostPath": {"path": "/", "type": "Directory"}}, "mountPath": "/host"})
    errors = template_policy.check_job(hostile)
    assert [e.path for e in errors] == ["spec.checkpoint.volume.hostPath"]
    assert template_policy.check_job(hostile, frozenset({"hostPath"})) == []
    nfs = job(checkpoint={"volume": {"nfs": {"server": "nfs", "path": "/ckpt"}}, "mountPath": "/ckpt"})
    assert template_policy.check_job(nfs) == []


def test_a_system_priority_class_in_spec_scheduling_is_refused_too() -> None:
    hostile = job(scheduling={"priorityClassName": "system-cluster-critical"})
    errors = template_policy.check_job(hostile)
    assert [e.path for e in errors] == ["spec.scheduling.priorityClassName"]
    assert "templatePolicy.allow: [systemPriority]" in errors[0].message
    assert template_policy.check_job(hostile, frozenset({"systemPriority"})) == []
    assert template_policy.check_job(job(scheduling={"priorityClassName": "team-high"})) == []


def test_what_a_training_job_needs_is_not_refused() -> None:
    fine = {
        "metadata": {"labels": {"team": "vision"}, "annotations": {"note": "x"}},
        "spec": {
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "automountServiceAccountToken": False,
            "securityContext": {
                "seLinuxOptions": {"type": "container_t"},
                "sysctls": [
                    {"name": "net.ipv4.tcp_syncookies", "value": "1"},
                    {"name": "net.ipv4.tcp_rmem", "value": "4096 87380 6291456"},
                ],
            },
            "nodeSelector": {"kubernetes.io/hostname": "gpu-node-3"},
            "priorityClassName": "team-high",
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
            "containers": [
                {
                    "name": "trainer",
                    "ports": [{"containerPort": 6006}],
                    "livenessProbe": {"httpGet": {"path": "/progress", "port": 29510}},
                    "securityContext": {"procMount": "Default", "seccompProfile": {"type": "RuntimeDefault"}},
                }
            ],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "imagenet"}}],
        },
    }
    assert template_policy.check_job(job(fine)) == []


def test_an_unknown_allowance_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown template allowance 'root'"):
        template_policy.parse_allowances("hostPath, root")
    assert template_policy.parse_allowances("hostPath,nodeName") == {"hostPath", "nodeName"}


def test_the_threat_model_describes_every_allowance_and_nothing_else() -> None:
    doc = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "threat-model.md").read_text()
    table = doc.split("| allowance | what it lets a job's Pods do |")[1].split("\n\n")[0]
    assert sorted(re.findall(r"^\| `(\w+)` \|", table, flags=re.M)) == sorted(template_policy.ALLOWANCES)
