"""Graceful deletion of Pods, as the API server does it (used by `store.Store`)."""

from __future__ import annotations

import datetime
from typing import Any

from kmock import resource as Resource

from ddpjob.times import format_time, parse_time
from ddpjob_devcluster.apiserver.registry.plaindata import fresh

PODS = Resource(group="", version="v1", plural="pods")
DEFAULT_GRACE_SECONDS = 30  # spec.terminationGracePeriodSeconds' default


def graceful_delete(pod: dict[str, Any], requested: int | None) -> dict[str, Any] | None:
    """A Pod's graceful deletion, as the API server does it: the Pod with its deletion
    marked (to store), `pod` itself (nothing changes), or None (delete it now).

    pkg/registry/core/pod/strategy.go CheckGracefulDelete: the period is the request's,
    else spec.terminationGracePeriodSeconds (30); 0 for a Pod on no node or in a terminal
    phase. apiserver/pkg/registry/rest/delete.go BeforeDelete: a first graceful delete
    sets deletionTimestamp = now + period and deletionGracePeriodSeconds; a later one may
    only shorten it; period 0 (or an earlier grace of 0) deletes now. The kubelet ends it
    with a delete of period 0 once the containers stopped; a lost kubelet never does, and
    the Pod stays Terminating until someone force-deletes it (grace 0).
    """
    spec, meta = pod.get("spec") or {}, pod["metadata"]
    period = requested if requested is not None else spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)
    period = 1 if period is not None and period < 0 else int(period or 0)
    if not spec.get("nodeName") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        period = 0
    deleting = parse_time(meta.get("deletionTimestamp"))
    if deleting is not None:
        old = meta.get("deletionGracePeriodSeconds")
        if not old or period == 0:
            return None
        if period >= old:
            return pod  # never lengthened
        new = fresh(pod)
        stamp = deleting - datetime.timedelta(seconds=old - period)
        new["metadata"].update(deletionTimestamp=format_time(stamp), deletionGracePeriodSeconds=period)
        return new
    if period == 0:
        return None
    new = fresh(pod)
    stamp = datetime.datetime.now(tz=datetime.UTC) + datetime.timedelta(seconds=period)
    new["metadata"].update(deletionTimestamp=format_time(stamp), deletionGracePeriodSeconds=period)
    if new["metadata"].get("generation"):
        new["metadata"]["generation"] += 1
    return new
