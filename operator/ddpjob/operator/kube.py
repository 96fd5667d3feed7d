"""The one module of the operator that talks to the Kubernetes API.

It rides on kopf's own API client (kopf is pinned to 1.45.2 in pyproject.toml), so the
operator's writes share kopf's credentials (whatever `@kopf.on.login` produced: a
kubeconfig, the in-cluster service account, or a test's emulator), its HTTP session,
its re-authentication on 401 and its retries: kopf retries timeouts, connection errors,
5xx and 429 with `settings.networking.error_backoffs` before an error reaches us. What
still fails is raised, and the caller's reconcile is retried with its own backoff.

Every write here is idempotent: create tolerates 409 AlreadyExists (and reads what is
there instead), delete tolerates 404, status patches are JSON merge patches without a
resourceVersion (the operator is the status' only writer).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Mapping

# kopf's client lives in a private package; this is the only import of it, and the
# version pin keeps it stable.
from kopf._cogs.clients import api as _api
from kopf._cogs.clients import errors as _errors

from ddpjob.api import names
from ddpjob.render.gang import POD_GROUP_KINDS

logger = logging.getLogger("ddpjob.operator.kube")



class APIError(Exception):
    """An API request the server refused: `status` (HTTP code), `reason` (the Status
    reason: Forbidden, Invalid, AlreadyExists, ...), `message` (the server's words)."""

    def __init__(self, status: int, reason: str, message: str, details: Mapping[str, Any] | None = None):
        super().__init__(message)
        self.status, self.reason, self.message = int(status), reason or "", message or ""
        self.details: dict[str, Any] = dict(details or {})


class NotFound(APIError):
    pass


class Conflict(APIError):  # 409: AlreadyExists on create, Conflict on a stale write
    pass


class Forbidden(APIError):  # 403: RBAC, ResourceQuota, Pod Security, namespace terminating
    pass


class Invalid(APIError):  # 422: the object fails the server's validation
    pass


_BY_STATUS: dict[int, type[APIError]] = {404: NotFound, 409: Conflict, 403: Forbidden, 422: Invalid}


def _typed(exc: _errors.APIError) -> APIError:
    """kopf's error as ours (kopf's classes stay private to this module)."""
    payload = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], Mapping) else {}
    message = exc.message or (exc.args[0] if exc.args and isinstance(exc.args[0], str) else "") or repr(exc)
    cls = _BY_STATUS.get(exc.status, APIError)
    return cls(exc.status, str(payload.get("reason") or ""), str(message), payload.get("details") or None)

# kopf's HTTP session has no connection limit; a burst of 1,000 new jobs would open
# thousands of sockets at once. 64 requests in flight keep the API server (and the
# process' file descriptors) comfortable and still saturate one API server.
DEFAULT_MAX_IN_FLIGHT = 64

_MERGE_PATCH = {"Content-Type": "application/merge-patch+json"}


def pods_path(namespace: str, name: str | None = None) -> str:
    base = f"/api/v1/namespaces/{namespace}/pods"
    return f"{base}/{name}" if name else base


def services_path(namespace: str, name: str | None = None) -> str:
    base = f"/api/v1/namespaces/{namespace}/services"
    return f"{base}/{name}" if name else base


def job_path(namespace: str, name: str) -> str:
    return f"/apis/{names.GROUP}/{names.VERSION}/namespaces/{namespace}/{names.PLURAL}/{name}"


# What the operator creates, by (apiVersion, kind): the plural of its collection.
CREATED_KINDS = {("v1", "Pod"): "pods", ("v1", "Service"): "services",
                 **{api_kind: "podgroups" for api_kind in POD_GROUP_KINDS.values()}}


def object_path(api_version: str, kind: str, namespace: str, name: str | None = None) -> str:
    plural = CREATED_KINDS.get((api_version, kind))
    if plural is None:
        raise ValueError(f"the operator creates only {sorted(CREATED_KINDS)}, not {api_version} {kind}")
    base = f"/api/v1/namespaces/{namespace}/{plural}" if api_version == "v1" else (
        f"/apis/{api_version}/namespaces/{namespace}/{plural}")
    return f"{base}/{name}" if name else base


def collection_path(obj: Mapping[str, Any]) -> str:
    return object_path(obj.get("apiVersion", "v1"), obj["kind"], obj["metadata"]["namespace"])


class Kube:
    """Thin async calls; `settings` are kopf's (for its timeouts and retry backoffs)."""

    def __init__(self, settings: Any, max_in_flight: int = DEFAULT_MAX_IN_FLIGHT):
        self.settings = settings
        self._slots = asyncio.Semaphore(max_in_flight)

    async def _call(self, fn: Any, url: str, **kwargs: Any) -> Any:
        async with self._slots:
            try:
                return await fn(url, settings=self.settings, logger=logger, **kwargs)
            except _errors.APIError as exc:
                raise _typed(exc) from exc

    async def get(self, url: str) -> dict[str, Any]:
        return await self._call(_api.get, url)

    async def served(self, url: str) -> bool:
        """Whether API discovery knows `url` (e.g. /apis/scheduling.volcano.sh/v1beta1)."""
        try:
            await self.get(url)
            return True
        except NotFound:
            return False

    async def create(self, obj: Mapping[str, Any], read_existing: bool = True) -> tuple[dict[str, Any] | None, bool]:
        """Create `obj` unless it exists. Returns (the object, whether this call created it).

        A 409 is success: an earlier attempt whose answer was lost, or another replica.
        With `read_existing`, what is there is read back, so the caller sees the truth
        (it may be an older object with the same name) rather than what it asked for."""
        url = collection_path(obj)
        try:
            # No retries inside kopf's client (it retries 403s, taking quota and policy
            # refusals for an upgrading API server): a refused create is the controller's
            # to report and back off (operator/refusals.py).
            return await self._call(_api.post, url, payload=dict(obj), backoffs=()), True
        except Conflict:
            if not read_existing:
                return None, False
            return await self.get(f"{url}/{obj['metadata']['name']}"), False

    async def get_node(self, name: str) -> dict[str, Any] | None:
        """The Node, or None when it is gone."""
        try:
            return await self.get(f"/api/v1/nodes/{name}")
        except NotFound:
            return None

    async def delete(self, url: str, *, uid: str | None = None, propagation: str = "Background",
                     grace_period: int | None = None) -> bool:
        """Delete; False when it was already gone. `uid` makes it a precondition, so an
        object recreated under the same name is never deleted by mistake. `grace_period=0`
        is a force delete (for a Pod whose kubelet can no longer confirm)."""
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        if grace_period is not None:
            options["gracePeriodSeconds"] = grace_period
        if uid:
            options["preconditions"] = {"uid": uid}
        try:
            await self._call(_api.delete, url, payload=options)
            return True
        except NotFound:
            return False
        except Conflict:
            return False  # the uid precondition failed: that object is not ours to delete

    async def patch_status(self, namespace: str, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """JSON merge patch of the DDPJob's status subresource; `None` values remove keys."""
        return await self._call(_api.patch, f"{job_path(namespace, name)}/status",
                                payload={"status": dict(patch)}, headers=_MERGE_PATCH)
