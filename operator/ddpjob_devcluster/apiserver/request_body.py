"""What a request to the emulator carries: its body, its DeleteOptions and dryRun, and a path rewritten.

The API server's decoding steps that kmock does not do, each as the server does it
(cited where it matters), for the emulator's serving hooks.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp.web
import yaml
from kmock import resource as Resource
from kmock._internal import rendering

from ddpjob_devcluster.apiserver.errors import ApiError


def quantities_as_strings(pod: Any) -> None:
    """The API server decodes `resources` into resource.Quantity and always returns a
    string (`nvidia.com/gpu: 1` is stored and read back as "1"); clients' models insist on it."""
    spec = pod.get("spec") if isinstance(pod, dict) else None
    for container in (spec or {}).get("containers") or []:
        for values in ((container.get("resources") or {}).get(k) for k in ("limits", "requests")):
            if not values:
                continue
            for key, qty in values.items():
                if isinstance(qty, (int, float)) and not isinstance(qty, bool):
                    values[key] = str(qty)


def with_path(raw_request: aiohttp.web.BaseRequest, path: str) -> Any:
    # yarl's with_path() drops the query string (?watch=true...), so put it back.
    return raw_request.rel_url.with_path(path).with_query(raw_request.rel_url.query)


def body(request: rendering.Request) -> Any:
    if request.data is not None:
        return request.data
    if request.text.strip():
        try:
            return json.loads(request.text)
        except ValueError:
            return yaml.safe_load(request.text)
    return {}


def require_name(request: rendering.Request) -> str:
    if not request.name:
        raise ApiError(405, "MethodNotAllowed", f"{request.method} needs an object name")
    return request.name


def require_resource(request: rendering.Request) -> Resource:
    """The resource the path names; a path that names none is not found, as the store
    answers an unserved resource."""
    if request.resource is None:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    return request.resource


def dry_run(request: rendering.Request) -> bool:
    return bool(request.params.get("dryRun"))


def delete_options(request: rendering.Request) -> dict:
    """DeleteOptions come from the body when there is one, and then the query is ignored;
    from the query only without a body (apiserver handlers/delete.go: the body is decoded,
    else the query parameters). A client that sends gracePeriodSeconds=0 as a query
    parameter beside a body gets the default grace on a real server."""
    if isinstance(request.data, dict) and request.data:
        return request.data
    return dict(request.params)


def grace_and_uid(request: rendering.Request) -> tuple[int | None, str | None]:
    """DeleteOptions' gracePeriodSeconds and preconditions.uid."""
    options = delete_options(request)
    grace = options.get("gracePeriodSeconds")
    uid = (options.get("preconditions") or {}).get("uid") if isinstance(options.get("preconditions"), dict) else None
    return (int(grace) if grace is not None else None), uid


def propagation(request: rendering.Request) -> str | None:
    return delete_options(request).get("propagationPolicy")
