"""What a DDPJob may ask of the Pods the operator creates: the operator's template policy.

A DDPJob's template and checkpoint volume are merged into Pods that the operator creates
with its own ServiceAccount, so they are where a job's author could ask for more than a
Pod of their own would get (often they may create DDPJobs but not Pods). By default the
operator refuses:

- everything the baseline Pod Security Standard forbids (`baseline_checks.py`), over
  the whole Pod template (every container: init, ephemeral, sidecars; Pod- and
  container-level securityContext; every volume) and the checkpoint volume;
- and beyond that standard, what would let a job act as someone else or somewhere else:
  a `serviceAccountName`, `automountServiceAccountToken: true`, a projected
  ServiceAccount token or Pod certificate (`serviceAccount`), `nodeName` (`nodeName`), a
  toleration of every taint or of the control plane's (`tolerateAll`), `hostAliases`
  (`hostAliases`: e.g. a fake kubernetes.default.svc), what joins another's gang, queue
  or claim (`controllerLabels`: Kueue's queue, Volcano's and coscheduling's group labels
  and annotations, the label a job's TensorBoard Service selects by, `schedulingGroup`, a
  ResourceClaim by name, eviction responders; the operator sets the gang's own from
  `spec.scheduling`), and the system's priority
  classes (`systemPriority`: `system-cluster-critical`, `system-node-critical`), and CSI
  inline volumes (`csiVolumes`: a driver's attributes reach what the author may not, a
  secrets-store `secretProviderClass` the Secrets it names, by a path no check here or in
  the API server's admission policy can follow).

A job's Secret and ConfigMap references are checked against its author's own rights by
the API server (the chart's admission policy, manifests/policy/): only it knows who
wrote the job. docs/threat-model.md has the whole picture.

A cluster admin allows items one by one with the operator's `DDPJOB_TEMPLATE_ALLOW`
(chart value `templatePolicy.allow`). `ddpjob validate`, `ddpjob submit` and the
operator call the same `check_job()`. Pod Security Admission in the namespace still
applies on top. docs/threat-model.md says what each allowance grants.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ddpjob.api import baseline_checks, tensorboard
from ddpjob.api.baseline_checks import CAPABILITIES, HOST_NAMESPACES, HOST_PATH, PRIVILEGED, Finding  # noqa: F401 (names of the policy)
from ddpjob.api.errors import FieldError

SERVICE_ACCOUNT, NODE_NAME, TOLERATE_ALL = "serviceAccount", "nodeName", "tolerateAll"
HOST_ALIASES, CONTROLLER_LABELS, SYSTEM_PRIORITY = "hostAliases", "controllerLabels", "systemPriority"
CSI_VOLUMES = "csiVolumes"
ALLOWANCES = (
    *baseline_checks.BASELINE,
    SERVICE_ACCOUNT,
    NODE_NAME,
    TOLERATE_ALL,
    HOST_ALIASES,
    CONTROLLER_LABELS,
    SYSTEM_PRIORITY,
    CSI_VOLUMES,
)
ENV = "DDPJOB_TEMPLATE_ALLOW"  # comma-separated allowances, set by the chart
# Label prefixes other controllers act on: a Pod carrying them joins their queue or group.
CONTROLLER_PREFIXES = (
    "kueue.x-k8s.io/",
    "volcano.sh/",
    "scheduling.volcano.sh/",
    "scheduling.x-k8s.io/",
    "pod-group.scheduling.sigs.k8s.io",
    "scheduling.k8s.io/",
)
# The taints kubeadm and every distribution put on control-plane nodes.
CONTROL_PLANE_TAINTS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
# PriorityClass names with this prefix are the system's (the API server reserves it):
# system-cluster-critical and system-node-critical preempt every workload.
SYSTEM_PRIORITY_PREFIX = "system-"


def parse_allowances(text: str | Iterable[str] | None) -> frozenset[str]:
    """`"privileged,hostPath"` -> the set; ValueError naming an unknown allowance."""
    items = [t.strip() for t in (text.split(",") if isinstance(text, str) else text or []) if t and t.strip()]
    unknown = [t for t in items if t not in ALLOWANCES]
    if unknown:
        raise ValueError(f"unknown template allowance {unknown[0]!r} (known: {', '.join(ALLOWANCES)})")
    return frozenset(items)


def _mapping(value: object) -> Mapping[str, Any]:
    """A field that should hold an object: itself, or empty when it holds anything else."""
    return value if isinstance(value, Mapping) else {}


def _beyond_baseline(template: Mapping[str, Any], base: str) -> Iterator[Finding]:
    spec = _mapping(template.get("spec"))
    sbase = f"{base}.spec"
    for key in ("serviceAccountName", "serviceAccount"):
        if spec.get(key):
            yield SERVICE_ACCOUNT, f"{sbase}.{key}", "running as another ServiceAccount"
    if spec.get("automountServiceAccountToken") is True:
        yield SERVICE_ACCOUNT, f"{sbase}.automountServiceAccountToken", "mounting a ServiceAccount token"
    for i, volume in enumerate(spec.get("volumes") or []):
        sources = (volume.get("projected") or {}).get("sources") if isinstance(volume, Mapping) else None
        for j, source in enumerate(sources or []):
            for key, what in (
                ("serviceAccountToken", "a projected ServiceAccount token"),
                ("podCertificate", "a projected Pod certificate (the ServiceAccount's identity)"),
            ):
                if isinstance(source, Mapping) and key in source:
                    yield SERVICE_ACCOUNT, f"{sbase}.volumes[{i}].projected.sources[{j}].{key}", what
    for i, volume in enumerate(spec.get("volumes") or []):
        if isinstance(volume, Mapping) and "csi" in volume:
            what = "a CSI inline volume (its driver's attributes are unchecked)"
            yield CSI_VOLUMES, f"{sbase}.volumes[{i}].csi", what
    if spec.get("nodeName"):
        yield NODE_NAME, f"{sbase}.nodeName", "pinning the Pod to a node"
    for i, toleration in enumerate(spec.get("tolerations") or []):
        if isinstance(toleration, Mapping) and toleration.get("operator") == "Exists" and not toleration.get("key"):
            yield TOLERATE_ALL, f"{sbase}.tolerations[{i}]", "tolerating every taint"
        elif isinstance(toleration, Mapping) and toleration.get("key") in CONTROL_PLANE_TAINTS:
            yield TOLERATE_ALL, f"{sbase}.tolerations[{i}]", "tolerating the control plane's taint"
    if spec.get("hostAliases"):
        yield HOST_ALIASES, f"{sbase}.hostAliases", "hostAliases"
    yield from _joining(spec, sbase)
    priority = spec.get("priorityClassName")
    if isinstance(priority, str) and priority.startswith(SYSTEM_PRIORITY_PREFIX):
        yield SYSTEM_PRIORITY, f"{sbase}.priorityClassName", f"the system's priority class {priority[:80]!r}"
    metadata = _mapping(template.get("metadata"))
    # Annotations too: Volcano reads the group from `scheduling.k8s.io/group-name` and Kueue
    # the group size from `kueue.x-k8s.io/pod-group-total-count`; with the template's
    # schedulerName, such an annotation would put the Pods in another job's gang.
    for kind in ("labels", "annotations"):
        keys = _mapping(metadata.get(kind))
        for key in keys:
            if kind == "labels" and key == tensorboard.LABEL_FOR:
                yield (
                    CONTROLLER_LABELS,
                    f"{base}.metadata.labels[{key}]",
                    "the label a job's TensorBoard Service selects its Pod by (the Pods would join that Service)",
                )
            elif isinstance(key, str) and key.startswith(CONTROLLER_PREFIXES):
                yield (
                    CONTROLLER_LABELS,
                    f"{base}.metadata.{kind}[{key}]",
                    f"a{'n annotation' if kind == 'annotations' else ' label'} another controller acts on "
                    "(spec.scheduling sets these)",
                )


def _joining(spec: Mapping[str, Any], sbase: str) -> Iterator[Finding]:
    """Pod fields that put the Pods into someone else's group (as the labels do)."""
    if spec.get("schedulingGroup"):
        yield CONTROLLER_LABELS, f"{sbase}.schedulingGroup", "joining a PodGroup (spec.scheduling sets the job's own)"
    for i, claim in enumerate(spec.get("resourceClaims") or []):
        if isinstance(claim, Mapping) and claim.get("resourceClaimName"):
            yield (
                CONTROLLER_LABELS,
                f"{sbase}.resourceClaims[{i}].resourceClaimName",
                "sharing an existing ResourceClaim (its devices are allocated to whoever made it)",
            )
    if spec.get("evictionResponders"):
        yield CONTROLLER_LABELS, f"{sbase}.evictionResponders", "naming controllers that answer the Pods' evictions"


def _errors(found: Iterable[Finding], allow: frozenset[str]) -> list[FieldError]:
    return [
        FieldError(
            path,
            f"{what} is refused by the operator's template policy "
            f"(an admin can allow it: templatePolicy.allow: [{allowance}])",
        )
        for allowance, path, what in found
        if allowance not in allow
    ]


def check(template: Mapping[str, Any] | None, allow: frozenset[str] = frozenset()) -> list[FieldError]:
    """Field errors for what a Pod template asks and the policy does not allow."""
    if not isinstance(template, Mapping):
        return []
    found = [*baseline_checks.findings(template), *_beyond_baseline(template, "spec.template")]
    return _errors(found, allow)


def check_job(job: Any, allow: frozenset[str] = frozenset()) -> list[FieldError]:
    """The whole job: its template, and its checkpoint volume (a volume source the Pods
    mount like any other: hostPath there is hostPath)."""
    errors: list[FieldError] = []
    volume = job.checkpoint.volume if job.checkpoint is not None else None
    if isinstance(volume, Mapping):
        as_template = {"spec": {"volumes": [volume]}}
        found = [
            (a, p.replace("spec.template.spec.volumes[0]", "spec.checkpoint.volume"), w)
            for a, p, w in [*baseline_checks.findings(as_template), *_beyond_baseline(as_template, "spec.template")]
        ]
        errors += _errors(found, allow)
    priority = job.scheduling.priority_class_name
    if isinstance(priority, str) and priority.startswith(SYSTEM_PRIORITY_PREFIX):
        errors += _errors(
            [(SYSTEM_PRIORITY, "spec.scheduling.priorityClassName", f"the system's priority class {priority!r}")], allow
        )
    return errors + check(job.template, allow)  # in the spec's order: checkpoint, scheduling, template
