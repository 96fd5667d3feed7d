"""ResourceQuota admission for Pod creation.

Upstream: staging/src/k8s.io/apiserver/pkg/admission/plugin/resourcequota/controller.go
(CheckRequest) and pkg/quota/v1/evaluator/core/pods.go (podEvaluator: Usage, Constraints,
QuotaV1Pod); https://kubernetes.io/docs/concepts/policy/resource-quotas/. Each quota of
the namespace is checked in turn; the first one the new Pod would exceed refuses it:

    pods "x" is forbidden: exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1

listing only the exceeded resources, sorted, `key=quantity` joined by ','. A quota on
cpu or memory also refuses a Pod that does not specify them ("failed quota: q: must
specify limits.cpu").

Differences, kept small on purpose: usage is computed from the live Pods at admission
time (the real plugin reads `status.used`, which the quota controller keeps current
within seconds), quota scopes and scope selectors are not modelled, and quantities are
printed in a canonical form (a whole number, milli-units `500m`, or binary suffixes)
where the real server keeps the form they were written in.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from ddpjob.api.quantity import format_quantity, parse_quantity
from ddpjob.times import parse_time
from ddpjob_devcluster.apiserver.errors import ApiError

# pkg/quota/v1/evaluator/core/pods.go: requests.cpu and cpu are the same resource.
ALIASES = {
    "cpu": "requests.cpu",
    "memory": "requests.memory",
    "ephemeral-storage": "requests.ephemeral-storage",
    "count/pods": "pods",
}
# Constraints: a quota naming one of these needs every container to specify it.
REQUIRED_BY_QUOTA = ("requests.cpu", "requests.memory", "limits.cpu", "limits.memory")


def _q(value: Any) -> Decimal:
    try:
        return parse_quantity(value)
    except (ValueError, TypeError):
        return Decimal(0)


def fmt(q: Decimal) -> str:
    """A quota's quantities print in binary units where they divide (the API server's
    canonical form for the byte quantities a quota mostly holds)."""
    return format_quantity(q, binary=True)


def pod_usage(pod: Mapping[str, Any]) -> dict[str, Decimal]:
    """What one Pod counts against a quota (podEvaluator.Usage): the Pod itself, and the
    sum of its containers' requests and limits (the larger of that and any init container)."""
    spec = pod.get("spec") or {}
    usage: dict[str, Decimal] = {"pods": Decimal(1)}

    def total(containers: Iterable[Mapping[str, Any]], kind: str) -> dict[str, Decimal]:
        out: dict[str, Decimal] = {}
        for c in containers:
            for name, value in ((c.get("resources") or {}).get(kind) or {}).items():
                out[name] = out.get(name, Decimal(0)) + _q(value)
        return out

    for kind in ("requests", "limits"):
        main = total(spec.get("containers") or [], kind)
        for init in spec.get("initContainers") or []:
            for name, value in total([init], kind).items():
                main[name] = max(main.get(name, Decimal(0)), value)
        # Defaulting copies a limit into a missing request (pkg/apis/core/v1/defaults.go).
        if kind == "requests":
            for name, value in total(spec.get("containers") or [], "limits").items():
                main.setdefault(name, value)
        for name, value in main.items():
            usage[f"{kind}.{name}"] = value
    return usage


def counts(pod: Mapping[str, Any], now: datetime.datetime) -> bool:
    """QuotaV1Pod: terminal Pods, and Pods past their deletion grace, no longer count."""
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    meta = pod.get("metadata") or {}
    deleting = parse_time(meta.get("deletionTimestamp"))
    grace = meta.get("deletionGracePeriodSeconds")
    return not (deleting is not None and grace is not None and now > deleting + datetime.timedelta(seconds=int(grace)))


def _containers_specify(pod: Mapping[str, Any], resource: str) -> bool:
    kind, name = resource.split(".", 1)
    for c in (pod.get("spec") or {}).get("containers") or []:
        resources = c.get("resources") or {}
        if name not in (resources.get(kind) or {}) and not (
            kind == "requests" and name in (resources.get("limits") or {})
        ):
            return False
    return True


def admit(quotas: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]], pod: Mapping[str, Any]) -> None:
    name = (pod.get("metadata") or {}).get("name", "")
    now = datetime.datetime.now(datetime.UTC)
    requested = pod_usage(pod)
    used: dict[str, Decimal] = {}
    for other in pods:
        if counts(other, now):
            for key, value in pod_usage(other).items():
                used[key] = used.get(key, Decimal(0)) + value
    for quota in sorted(quotas, key=lambda q: q["metadata"]["name"]):
        qname = quota["metadata"]["name"]
        hard = {ALIASES.get(k, k): _q(v) for k, v in ((quota.get("spec") or {}).get("hard") or {}).items()}
        missing = [r for r in REQUIRED_BY_QUOTA if r in hard and not _containers_specify(pod, r)]
        if missing:
            raise ApiError(
                403,
                "Forbidden",
                f'pods "{name}" is forbidden: failed quota: {qname}: must specify ' + ",".join(sorted(missing)),
                {"name": name, "kind": "pods"},
            )
        exceeded = sorted(k for k in hard if k in requested and used.get(k, Decimal(0)) + requested[k] > hard[k])
        if exceeded:

            def show(values: Mapping[str, Decimal], keys: list[str]) -> str:
                return ",".join(f"{k}={fmt(values.get(k, Decimal(0)))}" for k in keys)

            raise ApiError(
                403,
                "Forbidden",
                f'pods "{name}" is forbidden: exceeded quota: {qname}, requested: '
                f"{show(requested, exceeded)}, used: {show(used, exceeded)}, "
                f"limited: {show(hard, exceeded)}",
                {"name": name, "kind": "pods"},
            )


def status(quota: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """`status` as the quota controller writes it (hard, and used for those resources)."""
    now = datetime.datetime.now(datetime.UTC)
    hard = (quota.get("spec") or {}).get("hard") or {}
    used: dict[str, Decimal] = {}
    for pod in pods:
        if counts(pod, now):
            for key, value in pod_usage(pod).items():
                used[key] = used.get(key, Decimal(0)) + value
    return {"hard": dict(hard), "used": {k: fmt(used.get(ALIASES.get(k, k), Decimal(0))) for k in hard}}
