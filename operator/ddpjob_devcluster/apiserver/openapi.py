"""The OpenAPI documents kubectl reads from an API server, served by the emulator from
the CRDs it holds: `kubectl explain ddpj.spec` works as against a real server.

kubectl 1.37's `explain` reads OpenAPI v3: `/openapi/v3` lists one document per group
version (`apis/ddpjob.io/v1alpha1`, with a hash for its cache), and that document has a
schema per kind, named as the apiextensions-apiserver names them (`io.ddpjob.v1alpha1.DDPJob`)
and marked with `x-kubernetes-group-version-kind`. Built-in kinds have no document here:
the emulator does not carry Kubernetes' own schemas. `kubectl apply` reads v2, served
empty by the cluster (cluster.serve_empty_openapi): validation is left to the server.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from typing import Any

from kmock._internal import references

CRDS = references.resource(group="apiextensions.k8s.io", version="v1", plural="customresourcedefinitions")
DOCUMENT = re.compile(r"/openapi/v3/apis/([^/]+)/([^/]+)")


def _served(store: Any) -> Iterator[tuple[str, str, str, dict[str, Any], str]]:
    """(group, version, kind, schema, collection path) of every served version of every CRD."""
    for crd in store.view_all(CRDS, None):
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        group = spec.get("group", "")
        for version in spec.get("versions") or []:
            if version.get("served", True):
                schema = (version.get("schema") or {}).get("openAPIV3Schema") or {"type": "object"}
                scope = "namespaces/{namespace}/" if spec.get("scope", "Namespaced") == "Namespaced" else ""
                yield (
                    group,
                    version.get("name", ""),
                    names.get("kind", ""),
                    schema,
                    f"/apis/{group}/{version.get('name', '')}/{scope}{names.get('plural', '')}",
                )


def schema_name(group: str, version: str, kind: str) -> str:
    """`ddpjob.io`, `v1alpha1`, `DDPJob` -> `io.ddpjob.v1alpha1.DDPJob` (the group reversed)."""
    return ".".join([*reversed(group.split(".")), version, kind])


def document(store: Any, group: str, version: str) -> dict[str, Any] | None:
    served = [s for s in _served(store) if s[:2] == (group, version)]
    if not served:
        return None
    # kubectl explain finds the kind from the resource's path (its GET operation's GVK),
    # then the schema that carries the same GVK.
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"},
        "paths": {
            path: {"get": {"x-kubernetes-group-version-kind": {"group": g, "version": v, "kind": kind}}}
            for g, v, kind, _, path in served
        },
        "components": {
            "schemas": {
                schema_name(g, v, kind): {
                    **schema,
                    "x-kubernetes-group-version-kind": [{"group": g, "version": v, "kind": kind}],
                }
                for g, v, kind, schema, _ in served
            }
        },
    }


def paths(store: Any) -> dict[str, Any]:
    """`/openapi/v3`: each group version's document, with the hash kubectl caches it by."""
    out = {}
    for group, version in sorted({served[:2] for served in _served(store)}):
        digest = hashlib.sha256(json.dumps(document(store, group, version), sort_keys=True).encode()).hexdigest()
        out[f"apis/{group}/{version}"] = {"serverRelativeURL": f"/openapi/v3/apis/{group}/{version}?hash={digest[:32]}"}
    return {"paths": out}


def serve(emulator: Any) -> None:
    """Route `/openapi/v3` and its documents on the emulator (read from its store on each request)."""
    from ddpjob_devcluster.apiserver.errors import ApiError

    async def root(request: Any) -> Any:
        return paths(emulator.store)

    async def one(request: Any) -> Any:
        match = DOCUMENT.fullmatch(request.url.path)
        found = document(emulator.store, *match.groups()) if match else None
        if found is None:
            raise ApiError(404, "NotFound", f"no OpenAPI document at {request.url.path}")
        return found

    emulator["get /openapi/v3"] << root
    emulator["get", DOCUMENT] << one
