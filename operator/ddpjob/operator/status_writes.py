"""The DDPJob's status write: once, whole, and onto the object version it was planned from.

Every status patch carries the resourceVersion of an object whose status is the one the
new status was planned from. A 409 Conflict is resolved by reading the object: if only its
metadata changed (kopf's own annotation patches), the same status is written onto the
current version; if its status changed (another operator replica during a leader
hand-over), nothing is written and `StatusChanged` makes the job plan again from the
stored status. So two replicas can never overwrite each other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ddpjob.operator.api_paths import job_path
from ddpjob.operator.kube import Conflict, Kube
from ddpjob.operator.observer import JobMemory


def status_patch(previous: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """A merge patch that turns `previous` into `new`: keys the plan dropped become null,
    at every depth (a merge patch merges objects, so a `progress` without its `eta`, or a
    `lastFailure` without the last one's `errorLine`, would otherwise keep the old key)."""
    patch = {
        key: status_patch(previous[key], value)
        if isinstance(value, Mapping) and isinstance(previous.get(key), Mapping)
        else value
        for key, value in new.items()
    }
    for key in previous:
        if key not in new:
            patch[key] = None
    return patch


class StatusChanged(Exception):
    """Someone else (another operator replica) changed the status this pass was planned
    from: nothing was written; the next pass plans again from the stored status."""


class StatusWriter:
    def __init__(self, kube: Kube, job_body: Callable[[str, str], Mapping[str, Any] | None]):
        self.kube = kube  # the controller hands in a replacement too
        self.job_body = job_body  # the index of DDPJobs: the newest resourceVersion known

    async def write(
        self, job: JobMemory, body: Mapping[str, Any], previous: Mapping[str, Any], new: dict[str, Any]
    ) -> Mapping[str, Any]:
        """Write `new` over `previous` (nothing when equal); returns the stored status and
        keeps it and its resourceVersion in `job`."""
        if new == previous:
            return previous
        ns, name = job.key
        kube = self.kube
        try:
            try:
                stored = await kube.patch_status(
                    ns, name, status_patch(previous, new), resource_version=self._version_of(job, body, previous)
                )
            except Conflict:
                stored = await self._conflict(job, previous, new)
        except StatusChanged:
            raise  # job.status now holds the stored status to plan from
        except BaseException:
            job.status = None  # the write may or may not have landed: re-read from the index
            raise
        job.status = dict((stored or {}).get("status") or new)
        job.resource_version = ((stored or {}).get("metadata") or {}).get("resourceVersion")
        return job.status

    def _version_of(self, job: JobMemory, body: Mapping[str, Any], previous: Mapping[str, Any]) -> str | None:
        """The resourceVersion of an object whose status is `previous`: the newest the index
        has (kopf's own annotation patches bump it without touching the status), else the
        one this operator's last write returned, else the body this pass started from."""
        latest = self.job_body(*job.key)
        if (
            latest is not None
            and str((latest.get("metadata") or {}).get("uid") or "") == job.uid
            and dict(latest.get("status") or {}) == previous
        ):
            return (latest.get("metadata") or {}).get("resourceVersion")
        if job.status is not None and job.status == previous and job.resource_version:
            return job.resource_version
        return (body.get("metadata") or {}).get("resourceVersion")

    async def _conflict(self, job: JobMemory, previous: Mapping[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        """The object changed since `previous` was read. If only its metadata did (kopf's
        annotations), write again onto the current version; if its status did (another
        replica), write nothing and plan again from that status."""
        ns, name = job.key
        kube = self.kube
        for _ in range(3):
            current = await kube.get(job_path(ns, name))
            meta = current.get("metadata") or {}
            status = dict(current.get("status") or {})
            if str(meta.get("uid") or "") != job.uid:
                raise StatusChanged("the DDPJob was replaced")
            if status == new:
                return current  # an earlier attempt of this very write landed
            if status != previous:
                job.status, job.resource_version = status, meta.get("resourceVersion")
                raise StatusChanged("the status was changed by another writer")
            try:
                return await kube.patch_status(
                    ns, name, status_patch(previous, new), resource_version=meta.get("resourceVersion")
                )
            except Conflict:
                continue
        raise StatusChanged("the DDPJob keeps changing")
