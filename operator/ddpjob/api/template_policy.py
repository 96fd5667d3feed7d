"""What a DDPJob may ask of the Pods the operator creates: the operator's template policy.

A DDPJob's template and checkpoint volume are merged into Pods that the operator creates
with its own ServiceAccount, so they are where a job's author could ask for more than a
Pod of their own would get (often they may create DDPJobs but not Pods). By default the
operator refuses:

- everything the baseline Pod Security Standard forbids (`baseline_checks.py`), over
  the whole Pod template (every container: init, ephemeral, sidecars; Pod- and
  container-level securityContext; every volume) and the checkpoint volume;
- and beyond that standard, what would let a job act as someone else or somewhere else:
  a `serviceAccountName`, `automountServiceAccountToken: true` or a projected
  ServiceAccount token (`serviceAccount`), `nodeName` (`nodeName`), a toleration of
  every taint (`tolerateAll`), `hostAliases` (`hostAliases`: e.g. a fake
  kubernetes.default.svc), and the labels other controllers act on
  (`controllerLabels`: Kueue's queue, Volcano's and coscheduling's group names; the
  operator sets those itself from `spec.scheduling`).

A cluster admin allows items one by one with the operator's `DDPJOB_TEMPLATE_ALLOW`
(chart value `templatePolicy.allow`). `ddpjob validate`, `ddpjob submit` and the
operator call the same `check_job()`. Pod Security Admission in the namespace still
applies on top. docs/threat-model.md says what each allowance grants.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ddpjob.api import baseline_checks
from ddpjob.api.baseline_checks import (CAPABILITIES, HOST_NAMESPACES, HOST_PATH, PRIVILEGED,  # noqa: F401 (names of the policy)
                                        Finding)
from ddpjob.api.errors import FieldError

SERVICE_ACCOUNT, NODE_NAME, TOLERATE_ALL = "serviceAccount", "nodeName", "tolerateAll"
HOST_ALIASES, CONTROLLER_LABELS = "hostAliases", "controllerLabels"
ALLOWANCES = (*baseline_checks.BASELINE, SERVICE_ACCOUNT, NODE_NAME, TOLERATE_ALL, HOST_ALIASES, CONTROLLER_LABELS)
ENV = "DDPJOB_TEMPLATE_ALLOW"  # comma-separated allowances, set by the chart
# Label prefixes other controllers act on: a Pod carrying them joins their queue or group.
CONTROLLER_PREFIXES = ("kueue.x-k8s.io/", "volcano.sh/", "scheduling.volcano.sh/", "scheduling.x-k8s.io/",
                       "pod-group.scheduling.sigs.k8s.io", "scheduling.k8s.io/")


def parse_allowances(text: str | Iterable[str] | None) -> frozenset[str]:
    """`"privileged,hostPath"` -> the set; ValueError naming an unknown allowance."""
    items = [t.strip() for t in (text.split(",") if isinstance(text, str) else text or []) if t and t.strip()]
    unknown = [t for t in items if t not in ALLOWANCES]
    if unknown:
        raise ValueError(f"unknown template allowance {unknown[0]!r} (known: {', '.join(ALLOWANCES)})")
    return frozenset(items)


def _beyond_baseline(template: Mapping[str, Any], base: str) -> Iterator[Finding]:
    spec = template.get("spec") if isinstance(template.get("spec"), Mapping) else {}
    sbase = f"{base}.spec"
    for key in ("serviceAccountName", "serviceAccount"):
        if spec.get(key):
            yield SERVICE_ACCOUNT, f"{sbase}.{key}", "running as another ServiceAccount"
    if spec.get("automountServiceAccountToken") is True:
        yield SERVICE_ACCOUNT, f"{sbase}.automountServiceAccountToken", "mounting a ServiceAccount token"
    for i, volume in enumerate(spec.get("volumes") or []):
        sources = (volume.get("projected") or {}).get("sources") if isinstance(volume, Mapping) else None
        for j, source in enumerate(sources or []):
            if isinstance(source, Mapping) and "serviceAccountToken" in source:
                yield (SERVICE_ACCOUNT, f"{sbase}.volumes[{i}].projected.sources[{j}].serviceAccountToken",
                       "a projected ServiceAccount token")
    if spec.get("nodeName"):
        yield NODE_NAME, f"{sbase}.nodeName", "pinning the Pod to a node"
    for i, toleration in enumerate(spec.get("tolerations") or []):
        if isinstance(toleration, Mapping) and toleration.get("operator") == "Exists" and not toleration.get("key"):
            yield TOLERATE_ALL, f"{sbase}.tolerations[{i}]", "tolerating every taint"
    if spec.get("hostAliases"):
        yield HOST_ALIASES, f"{sbase}.hostAliases", "hostAliases"
    metadata = template.get("metadata") if isinstance(template.get("metadata"), Mapping) else {}
    # Annotations too: Volcano reads the group from `scheduling.k8s.io/group-name` and Kueue
    # the group size from `kueue.x-k8s.io/pod-group-total-count`; with the template's
    # schedulerName, such an annotation would put the Pods in another job's gang.
    for kind in ("labels", "annotations"):
        keys = metadata.get(kind) if isinstance(metadata.get(kind), Mapping) else {}
        for key in keys:
            if isinstance(key, str) and key.startswith(CONTROLLER_PREFIXES):
                yield (CONTROLLER_LABELS, f"{base}.metadata.{kind}[{key}]",
                       f"a{'n annotation' if kind == 'annotations' else ' label'} another controller acts on "
                       "(spec.scheduling sets these)")


def _errors(found: Iterable[Finding], allow: frozenset[str]) -> list[FieldError]:
    return [FieldError(path, f"{what} is refused by the operator's template policy "
                             f"(an admin can allow it: templatePolicy.allow: [{allowance}])")
            for allowance, path, what in found if allowance not in allow]


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
        found = [(a, p.replace("spec.template.spec.volumes[0]", "spec.checkpoint.volume"), w)
                 for a, p, w in [*baseline_checks.findings(as_template), *_beyond_baseline(as_template,
                                                                                            "spec.template")]]
        errors += _errors(found, allow)
    return errors + check(job.template, allow)  # in the spec's order: checkpoint, then template
