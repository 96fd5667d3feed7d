"""Admission for the development cluster: what a real API server checks before it stores
a write, in its order (object validation, then validating admission plugins).

- Pods (create): `podvalidation` (422), `podsecurity` (403, by namespace label),
  `quota` (403, ResourceQuota);
- custom resources (create, update): `crdvalidation` (the CRD's schema and CEL rules,
  400/422), pruning and defaulting.

Writes made through `Store` directly (tests arranging a state) skip admission, as writes
straight into etcd would; everything arriving over HTTP goes through it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kmock import resource as Resource

from ddpjob_devcluster.apiserver.admission import crdvalidation, podsecurity, podvalidation, quota
from ddpjob_devcluster.apiserver.crd_validator import CRDValidator
from ddpjob_devcluster.apiserver.errors import ApiError
from ddpjob_devcluster.apiserver.registry.store import CRDS, NAMESPACES, Store

PODS = Resource(group="", version="v1", plural="pods")
QUOTAS = Resource(group="", version="v1", plural="resourcequotas")


def _no_new_finalizers_while_deleting(current: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    """apimachinery/pkg/api/validation/objectmeta.go ValidateObjectMetaUpdate: once an
    object is being deleted, finalizers may only be removed."""
    meta, old_meta = new.get("metadata") or {}, current.get("metadata") or {}
    if not old_meta.get("deletionTimestamp"):
        return
    added = set(meta.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
    if added:
        kind, name = current.get("kind", ""), old_meta.get("name", "")
        raise ApiError(
            422,
            "Invalid",
            f'{kind} "{name}" is invalid: metadata.finalizers: Forbidden: no new '
            "finalizers can be added if the object is being deleted",
            {"name": name, "kind": kind},
        )


class Admission:
    def __init__(self, store: Store):
        self.store = store
        self._validators: dict[tuple[str, str, str], CRDValidator] = {}

    def create(self, res: Resource, namespace: str | None, body: Any, params: Mapping[str, str]) -> Any:
        if not isinstance(body, dict):
            return body  # the store answers 400
        if res == PODS:
            pod = body  # the validating plugins only read it
            ns = namespace or (pod.get("metadata") or {}).get("namespace") or "default"
            podvalidation.validate(pod)
            podsecurity.admit(self.store.view(NAMESPACES, None, ns), pod)
            quotas = self.store.view_all(QUOTAS, ns)
            if quotas:  # resourcequota/controller.go checkRequest: no quotas, nothing to check
                quota.admit(quotas, self.store.view_all(PODS, ns), pod)
            return body
        validator = self._validator(res)
        if validator is not None:
            return crdvalidation.admit(validator, body, None, params)
        return body

    def update(
        self, res: Resource, current: Mapping[str, Any], new: dict[str, Any], sub: str | None, params: Mapping[str, str]
    ) -> dict[str, Any]:
        _no_new_finalizers_while_deleting(current, new)
        validator = self._validator(res) if sub is None else None
        if validator is None:
            return new
        out = crdvalidation.admit(validator, new, current, params)
        out["metadata"] = new["metadata"]  # server-owned fields were already settled by the store
        return out

    def pods_changed(self, namespace: str | None) -> None:
        """The quota controller's part (pkg/controller/resourcequota): after a Pod change,
        each quota's `status.hard`/`status.used` is brought up to date, for
        `kubectl describe quota`. Admission itself counts the live Pods."""
        if not namespace:
            return
        quotas = self.store.view_all(QUOTAS, namespace)
        pods = self.store.view_all(PODS, namespace) if quotas else []
        for q in quotas:
            status = quota.status(q, pods)
            if q.get("status") != status:
                self.store.patch(
                    QUOTAS,
                    namespace,
                    q["metadata"]["name"],
                    "status",
                    "application/merge-patch+json",
                    {"status": status},
                )

    def _validator(self, res: Resource) -> CRDValidator | None:
        if not res.group or res.group in ("apiextensions.k8s.io",):
            return None
        for crd in self.store.view_all(CRDS, None):
            spec = crd.get("spec") or {}
            if spec.get("group") == res.group and (spec.get("names") or {}).get("plural") == res.plural:
                key = (crd["metadata"]["uid"], crd["metadata"].get("resourceVersion", ""), str(res.version))
                if key not in self._validators:
                    self._validators[key] = CRDValidator(crd, str(res.version))
                return self._validators[key]
        return None
