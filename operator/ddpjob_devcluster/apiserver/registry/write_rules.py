"""What a client's write may change of a stored object, as the API server decides it.

Server-owned metadata (uid, resourceVersion, generation, ...) is kept; a write through
`/status` changes only the status and any other write everything but it (for resources
with a status subresource); generation counts changes of the desired state; a write that
names a resourceVersion is a precondition (409 Conflict when it is stale).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ddpjob_devcluster.apiserver.errors import ApiError
from ddpjob_devcluster.apiserver.registry.plaindata import fresh

# Fields the server owns: a client's PUT/PATCH cannot change them.
SERVER_OWNED_META = ('uid', 'creationTimestamp', 'deletionTimestamp', 'deletionGracePeriodSeconds',
                     'generation', 'namespace', 'name', 'resourceVersion')


def spec_part(obj: Mapping[str, Any]) -> dict[str, Any]:
    # Generation tracks the desired state: everything but metadata and status.
    return {k: v for k, v in obj.items() if k not in ('metadata', 'status', 'apiVersion', 'kind')}


def check_resource_version(candidate: Mapping[str, Any], current: Mapping[str, Any]) -> None:
    wanted = (candidate.get('metadata') or {}).get('resourceVersion')
    if wanted and wanted != current['metadata']['resourceVersion']:
        name = current['metadata']['name']
        raise ApiError(409, 'Conflict', f'Operation cannot be fulfilled on "{name}": the object has been '
                       'modified; please apply your changes to the latest version and try again',
                       {'name': name})


def apply_write(current: dict[str, Any], candidate: dict[str, Any], sub: str | None,
                status_subresource: bool) -> dict[str, Any]:
    """The object after a write: status-only via /status, everything-but-status otherwise."""
    if sub == 'status':
        new = fresh(current)
        new['status'] = fresh(candidate.get('status'))
        if new['status'] is None:
            del new['status']
        return new
    if sub:
        raise ApiError(404, 'NotFound', f'subresource {sub} is not emulated')
    new = fresh(candidate)
    meta = new.setdefault('metadata', {})
    for field in SERVER_OWNED_META:
        meta.pop(field, None)
        if field in current['metadata']:
            meta[field] = current['metadata'][field]
    new['apiVersion'], new['kind'] = current['apiVersion'], current['kind']
    if status_subresource:
        new.pop('status', None)
        if 'status' in current:
            new['status'] = fresh(current['status'])
    if spec_part(new) != spec_part(current):
        meta['generation'] = current['metadata'].get('generation', 1) + 1
    return new
