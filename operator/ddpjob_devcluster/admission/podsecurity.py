"""Pod Security Admission (enforce mode), by namespace label.

Upstream: staging/src/k8s.io/pod-security-admission (admission/admission.go EvaluatePod)
and https://kubernetes.io/docs/concepts/security/pod-security-admission/. A namespace
labelled `pod-security.kubernetes.io/enforce: baseline|restricted` refuses a Pod that
fails a check with 403 Forbidden:

    pods "x" is forbidden: violates PodSecurity "restricted:latest": <reason> (<detail>), ...

The checks themselves are the product's (`ddpjob.api.pod_security`, which the operator's
template policy uses too): baseline first, then restricted, each group in file-name
order, a restricted check replacing the baseline one it overrides. Not modelled: the
`warn`/`audit` modes (they never refuse) and versions other than "latest".
"""
from __future__ import annotations

from typing import Any, Mapping

from ddpjob.api.pod_security import LEVELS, violations
from ddpjob_devcluster.store import ApiError

ENFORCE = 'pod-security.kubernetes.io/enforce'
ENFORCE_VERSION = 'pod-security.kubernetes.io/enforce-version'


def admit(namespace: Mapping[str, Any] | None, pod: Mapping[str, Any]) -> None:
    labels = ((namespace or {}).get('metadata') or {}).get('labels') or {}
    level = labels.get(ENFORCE, 'privileged')
    if level not in LEVELS:
        level = 'restricted'  # an unknown level is enforced as the strictest (admission.go)
    found = violations(level, pod)
    if found:
        name = (pod.get('metadata') or {}).get('name', '')
        version = labels.get(ENFORCE_VERSION, 'latest')
        raise ApiError(403, 'Forbidden', f'pods "{name}" is forbidden: violates PodSecurity "{level}:{version}": '
                       + ', '.join(found), {'name': name, 'kind': 'pods'})
