"""What a job may ask of the Pods the operator creates: the operator's template policy.

The operator creates Pods with its own service account in every namespace it watches, so a
DDPJob's author, who may be allowed to create jobs but not Pods, must not get a Pod that
their own rights would not give them. The policy is applied to the whole rendered Pod
(every volume, the checkpoint volume included; every container, init, ephemeral and
sidecars included; Pod and container security contexts; labels and annotations), so no
field of the job can smuggle what another field may not ask for.

Refused by default: everything the baseline Pod Security Standard forbids
(`pod_security`), and beyond it what would let the Pod act as someone else, land on a node
of the author's choice, or steer another controller (`EXTRA`). A cluster admin allows
each item on its own with the operator's `--template-allow` (chart value
`templatePolicy.allow`); docs/threat-model.md says what each grants. Pod Security
Admission in the namespace still applies on top.

Pure: the operator, `ddpjob validate` and `ddpjob submit` call `check()` on
`render.render_pod(job, 0)` with the allowances they run with.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Mapping

from ddpjob.api import names, pod_security as pss
from ddpjob.api.spec import DDPJob, FieldError

ENV = "DDPJOB_TEMPLATE_ALLOW"  # comma-separated allowances, set by the chart

# allowance -> what the message calls the refused thing. Order: documentation order.
ALLOWANCES: dict[str, str] = {
    "privileged": "a privileged container",
    "hostPath": "a hostPath volume",
    "hostNamespaces": "the host's network, PID or IPC namespace",
    "capabilities": "adding Linux capabilities beyond the runtime's defaults",
    "hostPorts": "a hostPort",
    "hostProcess": "a Windows host process",
    "seLinux": "a custom SELinux user, role or type",
    "procMount": "an unmasked /proc",
    "unconfined": "an Unconfined seccomp or AppArmor profile",
    "sysctls": "a sysctl outside the safe set",
    "serviceAccount": "a service account of the author's choice",
    "serviceAccountToken": "a service account token in the Pod",
    "nodeName": "pinning the Pod to a node by name",
    "tolerateAll": "a toleration of every taint (operator Exists without a key)",
    "hostAliases": "hostAliases (entries in the Pod's /etc/hosts)",
    "controllerLabels": "a label or annotation another controller acts on",
}
PRIVILEGED, HOST_PATH, HOST_NAMESPACES, CAPABILITIES = "privileged", "hostPath", "hostNamespaces", "capabilities"

# Each baseline check of the Pod Security Standard and the allowance that lifts it.
BASELINE: dict[Callable, str] = {
    pss.app_armor: "unconfined", pss.capabilities_baseline: CAPABILITIES, pss.host_namespaces: HOST_NAMESPACES,
    pss.host_path_volumes: HOST_PATH, pss.host_ports: "hostPorts", pss.privileged: PRIVILEGED,
    pss.proc_mount: "procMount", pss.se_linux_options: "seLinux", pss.seccomp_baseline: "unconfined",
    pss.sysctls: "sysctls", pss.windows_host_process: "hostProcess",
}

# Label and annotation domains other controllers act on (schedulers, queues, workload
# controllers) and the operator's own: a template setting them could join another
# job's gang or queue, or be taken for a Pod of another workload. What the operator
# itself sets from spec.scheduling is not the template's and is never refused.
CONTROLLER_DOMAINS = ("ddpjob.io", "kueue.x-k8s.io", "volcano.sh", "scheduling.x-k8s.io", "scheduling.k8s.io",
                      "batch.kubernetes.io", "apps.kubernetes.io", "statefulset.kubernetes.io",
                      "jobset.sigs.k8s.io", "leaderworkerset.sigs.k8s.io", "kubeflow.org", "ray.io")
CONTROLLER_KEYS = ("controller-uid", "job-name", "pod-template-hash", "controller-revision-hash")
# The legacy seccomp annotations (removed in 1.27, honoured by older kubelets).
SECCOMP_ANNOTATIONS = ("seccomp.security.alpha.kubernetes.io/pod", "container.seccomp.security.alpha.kubernetes.io/")


def parse_allowances(text: str | Iterable[str] | None) -> frozenset[str]:
    """`"privileged,hostPath"` -> the set; ValueError naming an unknown allowance."""
    items = [t.strip() for t in (text.split(",") if isinstance(text, str) else text or []) if t and t.strip()]
    unknown = [t for t in items if t not in ALLOWANCES]
    if unknown:
        raise ValueError(f"unknown template allowance {unknown[0]!r} (known: {', '.join(ALLOWANCES)})")
    return frozenset(items)


def _is_controller_key(key: str) -> bool:
    domain = key.split("/", 1)[0] if "/" in key else ""
    return key in CONTROLLER_KEYS or any(domain == d or domain.endswith("." + d) for d in CONTROLLER_DOMAINS)


def _template_metadata(job: DDPJob) -> Mapping[str, Any]:
    meta = job.template.get("metadata") if isinstance(job.template, Mapping) else None
    return meta if isinstance(meta, Mapping) else {}


def extra(job: DDPJob, pod: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(allowance, Pod path) of what the policy refuses beyond the baseline standard."""
    spec = pss.pod_spec(pod)
    found: list[tuple[str, str]] = []
    for key in ("serviceAccountName", "serviceAccount"):
        if spec.get(key):
            found.append(("serviceAccount", f"spec.{key}"))
    if spec.get("automountServiceAccountToken") is not False:
        found.append(("serviceAccountToken", "spec.automountServiceAccountToken"))
    for i, volume in enumerate(pss.as_list(spec.get("volumes"))):
        sources = pss.as_list(pss.as_map(pss.as_map(volume).get("projected")).get("sources"))
        found += [("serviceAccountToken", f"spec.volumes[{i}].projected.sources[{j}].serviceAccountToken")
                  for j, s in enumerate(sources) if "serviceAccountToken" in pss.as_map(s)]
    if spec.get("nodeName"):
        found.append(("nodeName", "spec.nodeName"))
    for i, t in enumerate(pss.as_list(spec.get("tolerations"))):
        if pss.as_map(t).get("operator") == "Exists" and not pss.as_map(t).get("key"):
            found.append(("tolerateAll", f"spec.tolerations[{i}]"))
    if spec.get("hostAliases"):
        found.append(("hostAliases", "spec.hostAliases"))
    # Only what the template asked for: the operator's own labels are rendered over it.
    meta = _template_metadata(job)
    for kind in ("labels", "annotations"):
        for key, value in pss.as_map(meta.get(kind)).items():
            if _is_controller_key(str(key)):
                found.append(("controllerLabels", f"metadata.{kind}[{key}]"))
            elif kind == "annotations" and str(key).startswith(SECCOMP_ANNOTATIONS) and value == "unconfined":
                found.append(("unconfined", f"metadata.{kind}[{key}]"))
    return found


def job_path(job: DDPJob, pod: Mapping[str, Any], path: str) -> str:
    """The job's field that a path of its rendered Pod came from."""
    spec = pss.pod_spec(pod)
    m = re.fullmatch(r"spec\.volumes\[(\d+)\](.*)", path)
    if m:
        name, rest = pss.as_map(pss.as_list(spec.get("volumes"))[int(m[1])]).get("name"), m[2]
        if name == names.CHECKPOINT_VOLUME and job.checkpoint is not None:
            return ("spec.checkpoint.volume" if job.checkpoint.volume else "spec.checkpoint") + rest
        return _in_template(job, "volumes", name, rest, path)
    m = re.fullmatch(r"spec\.(initContainers|containers|ephemeralContainers)\[(\d+)\](.*)", path)
    if m:
        container = pss.as_map(pss.as_list(spec.get(m[1]))[int(m[2])])
        rest = m[3]
        port = re.fullmatch(r"\.ports\[(\d+)\](.*)", rest)
        if port:  # the trainer's ports are the operator's first, then the template's
            number = pss.as_map(pss.as_list(container.get("ports"))[int(port[1])]).get("containerPort")
            ports = pss.as_list(_template_item(job, m[1], container.get("name")).get("ports"))
            index = next((i for i, p in enumerate(ports) if pss.as_map(p).get("containerPort") == number), None)
            rest = f".ports[{index}]{port[2]}" if index is not None else rest
        return _in_template(job, m[1], container.get("name"), rest, path)
    return f"spec.template.{path}"


def _template_items(job: DDPJob, field: str) -> list:
    return pss.as_list(pss.as_map(job.template.get("spec")).get(field))


def _template_item(job: DDPJob, field: str, name: Any) -> Mapping[str, Any]:
    return next((pss.as_map(i) for i in _template_items(job, field) if pss.as_map(i).get("name") == name), {})


def _in_template(job: DDPJob, field: str, name: Any, rest: str, path: str) -> str:
    items = _template_items(job, field)
    index = next((i for i, item in enumerate(items) if pss.as_map(item).get("name") == name), None)
    if index is None:  # only the operator's own (the trainer with no template entry): say which
        return f"spec.template.{path}"
    return f"spec.template.spec.{field}[{index}]{rest}"


def _refused(path: str, allowance: str) -> FieldError:
    return FieldError(path, f"{ALLOWANCES[allowance]} is refused by the operator's template policy "
                            f"(an admin can allow it: templatePolicy.allow: [{allowance}])")


def check(job: DDPJob, pod: Mapping[str, Any], allow: frozenset[str] = frozenset()) -> list[FieldError]:
    """Field errors, naming the job's fields, for what its rendered Pod asks and the
    policy does not allow. `pod` is `render.render_pod(job, 0)`."""
    found = [(BASELINE[c], p) for c, f in pss.findings("baseline", pod) for p in f.paths] + extra(job, pod)
    errors, seen = [], set()
    for allowance, path in found:
        error = _refused(job_path(job, pod, path), allowance)
        if allowance not in allow and error.path not in seen:
            seen.add(error.path)
            errors.append(error)
    return errors
