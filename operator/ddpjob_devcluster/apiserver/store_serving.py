"""kmock's serving hooks (`_serve_list`, `_serve_create`, ...), answered from the
API-server-like store (`registry/store.py`) behind admission: a mixin of
`emulator.KubeEmulator`, whose attrs fields `store`, `admission` and `chaos` it reads.
Also the emulator's thread-safe snapshots for assertions.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from kmock._internal import references, rendering

from ddpjob_devcluster.apiserver import request_body, tables
from ddpjob_devcluster.apiserver.admission import Admission
from ddpjob_devcluster.apiserver.errors import ApiError
from ddpjob_devcluster.apiserver.registry import apply as server_side_apply
from ddpjob_devcluster.apiserver.registry.store import Store


class StoreServing:
    __slots__ = ()
    store: Store
    admission: Admission
    chaos: Any  # a scenarios.chaos.Chaos, or None

    async def _serve_list(self, request: rendering.Request) -> rendering.Payload:
        res = request_body.require_resource(request)
        return tables.maybe_table(self.store, request, self.store.list(res, request.namespace, request.params))

    async def _serve_fetch(self, request: rendering.Request) -> rendering.Payload:
        res, name = request_body.require_resource(request), request_body.require_name(request)
        return tables.maybe_table(self.store, request, self.store.get(res, request.namespace, name))

    async def _serve_create(self, request: rendering.Request) -> rendering.Payload:
        if request.subresource:  # e.g. pods/eviction, pods/binding: not emulated
            raise ApiError(404, "NotFound", f"subresource {request.subresource} is not emulated")
        res = request_body.require_resource(request)
        body = request_body.body(request)
        if res.plural == "pods" and not res.group:
            request_body.quantities_as_strings(body)
        body = self.admission.create(res, request.namespace, body, request.params)
        obj = self.store.create(res, request.namespace, body, request_body.dry_run(request))
        self._pods_changed(request)
        return rendering.Response(status=201, payload=obj)

    def _pods_changed(self, request: rendering.Request) -> None:
        if request.resource is not None and request.resource.plural in ("pods", "resourcequotas"):
            self.admission.pods_changed(request.namespace)

    async def _serve_replace(self, request: rendering.Request) -> rendering.Payload:
        name, res = request_body.require_name(request), request_body.require_resource(request)
        return self.store.replace(
            res,
            request.namespace,
            name,
            request.subresource,
            request_body.body(request),
            admit=self._admit_update(request),
        )

    async def _serve_update(self, request: rendering.Request) -> rendering.Payload:
        name, res = request_body.require_name(request), request_body.require_resource(request)
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
        if content_type in server_side_apply.APPLY_TYPES:
            # Admission as for any create or update (an apply is one or the other).
            applied = server_side_apply.apply(
                self.store,
                res,
                request.namespace,
                name,
                request.subresource,
                request_body.body(request),
                request.params,
                admit=self._admit_update(request),
                admit_create=lambda body: self.admission.create(res, request.namespace, body, request.params),
            )
            self._pods_changed(request)
            return applied
        patched = self.store.patch(
            res,
            request.namespace,
            name,
            request.subresource,
            content_type,
            request_body.body(request),
            admit=self._admit_update(request),
        )
        if request.subresource != "status" or res.plural == "pods":  # not our own quota writes
            self._pods_changed(request)
        return patched

    def _admit_update(self, request: rendering.Request) -> Any:
        res = request_body.require_resource(request)
        return lambda current, new: self.admission.update(res, current, new, request.subresource, request.params)

    async def _serve_delete(self, request: rendering.Request) -> rendering.Payload:
        res, name = request_body.require_resource(request), request_body.require_name(request)
        deleted = self.store.delete(
            res, request.namespace, name, request_body.propagation(request), *request_body.grace_and_uid(request)
        )
        self._pods_changed(request)
        return deleted

    async def _serve_delete_collection(self, request: rendering.Request) -> rendering.Payload:
        if request.resource is None or request.name:
            raise ApiError(405, "MethodNotAllowed", "DELETE is not allowed here")
        return self.store.delete_collection(
            request.resource, request.namespace, request.params, request_body.propagation(request)
        )

    async def _serve_watch(self, request: rendering.Request) -> AsyncIterator[rendering.Payload]:
        yield b""  # send the headers now: a quiet watch is still a started stream
        as_table = tables.WatchTables(self.store, request)
        events = self.store.watch(
            request_body.require_resource(request), request.namespace, request.name, request.params
        )
        if self.chaos is not None:
            events = self.chaos.limit(events)
        async for event in events:
            yield as_table(event)

    # ---- thread-safe snapshots for assertions -----------------------------------------

    def get_object(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The stored object (a deep copy), or None; resource like 'v1/pods' or 'ddpjob.io/v1alpha1/ddpjobs'."""
        return self.store.peek(references.resource(resource), namespace, name)

    def list_objects(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.store.peek_all(references.resource(resource), namespace)
