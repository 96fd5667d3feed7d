"""A job's TensorBoard (`spec.tensorboard`): made, reported and removed by the operator.

Each reconcile of a job asks `TensorBoards.sync` for its `status.tensorboard`, which the
controller writes with the rest of the status (the one writer). With the field on, the
job's Deployment and Service (render/tensorboard.py) are created once per job
incarnation (uid) and operator process: a create that finds them (409) reads them back,
and a name held by an object this job does not control is reported, never adopted. Off
again, they are deleted, each only if this job controls it. With the job, at its TTL
too, they go through their owner reference (the garbage collector), like its Pods.

What the API server refuses (no RBAC for Deployments, a quota, Pod Security) is written
into `status.tensorboard.message` and tried again with the refused-create backoff
(0.5 s doubling to 30 s); the training is never held back by it. A server in trouble
(5xx, 429) raises, and the work queue retries the reconcile.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from ddpjob import backoff, text
from ddpjob.api import tensorboard
from ddpjob.api.spec import DDPJob
from ddpjob.operator import refusals
from ddpjob.operator.api_paths import object_path
from ddpjob.operator.kube import APIError, Kube, NotFound
from ddpjob.render import tensorboard as render
from ddpjob.render.tensorboard import TensorBoardConfig

logger = logging.getLogger("ddpjob.operator.tensorboard")

Key = tuple[str, str]
RETRY = backoff.Backoff(refusals.BACKOFF_BASE, refusals.BACKOFF_CAP, jitter=0.1)
KEEP = object()  # sync's answer when the status must stay as it is


def wanted(job: DDPJob) -> bool:
    return job.checkpoint is not None and job.checkpoint.tensorboard


def address(job: DDPJob) -> dict[str, Any]:
    return {"url": tensorboard.url(job.name, job.namespace), "service": tensorboard.object_name(job.name)}


def with_status(status: Mapping[str, Any], board: Any) -> dict[str, Any]:
    """`status` with `status.tensorboard` set to `board` (None drops it; KEEP leaves it)."""
    new = dict(status)
    if board is KEEP:
        return new
    new.pop("tensorboard", None)
    if board is not None:
        new["tensorboard"] = board
    return new


class TensorBoards:
    def __init__(
        self,
        kube: Kube,
        config: TensorBoardConfig = render.DEFAULT_CONFIG,
        trigger: Callable[[str, str, float], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ):
        self.kube, self.config, self.trigger, self.monotonic = kube, config, trigger, monotonic
        self._made: dict[Key, str] = {}  # job -> the uid whose TensorBoard exists
        self._refused: dict[Key, tuple[int, float, str]] = {}  # job -> (refusals, retry at, message)

    def forget(self, key: Key) -> None:
        self._made.pop(key, None)
        self._refused.pop(key, None)

    async def sync(self, key: Key, uid: str | None, job: DDPJob | None, previous: Mapping[str, Any]) -> Any:
        """Make or remove the job's TensorBoard as its spec says; returns what
        `status.tensorboard` is to hold (None: nothing; KEEP: as it is)."""
        if job is None or not uid:
            return KEEP  # a spec the operator refuses: nothing is decided about it
        if not wanted(job):
            if key in self._made or previous.get("tensorboard"):
                await self._remove(job, uid)
            self.forget(key)
            return None
        if self._made.get(key) == uid:
            return address(job)
        refused = self._refused.get(key)
        if refused is not None and self.monotonic() < refused[1]:
            return {"message": refused[2]}
        failure = await self._create(job, uid)
        if failure is None:
            self._made[key] = uid
            self._refused.pop(key, None)
            return address(job)
        count = (refused[0] if refused else 0) + 1
        delay = RETRY.delay(count)
        self._refused[key] = (count, self.monotonic() + delay, failure)
        if self.trigger is not None:
            self.trigger(*key, delay)
        return {"message": failure}

    async def _create(self, job: DDPJob, uid: str) -> str | None:
        """Create the Service and Deployment; the first refusal, in words, or None."""
        for obj in render.render(job, self.config):
            kind, name = obj["kind"], obj["metadata"]["name"]
            try:
                found, _ = await self.kube.create(obj)
            except APIError as exc:
                if refusals.transient(exc):
                    raise
                refusal = refusals.from_api_error(kind, name, exc)
                logger.info("%s/%s: TensorBoard %s refused: %s", job.namespace, job.name, kind, refusal.message)
                return text.clean(f"{kind} {name}: {refusal.message}")
            if found is not None and refusals.controller_uid(found) != uid:
                return text.clean(refusals.not_owned(kind, found, job.name).message)
        return None

    async def _remove(self, job: DDPJob, uid: str) -> None:
        """Delete the job's Deployment, only if this job controls it. Its Service stays, with
        no Pod behind it, until the job goes (the garbage collector): the operator may not
        delete Services, so that it can never remove a Service that is not a job's."""
        name = tensorboard.object_name(job.name)
        for api_version, kind in (("apps/v1", "Deployment"),):
            path = object_path(api_version, kind, job.namespace, name)
            try:
                found = await self.kube.get(path)
            except NotFound:
                continue
            if refusals.controller_uid(found) == uid:
                await self.kube.delete(path, uid=(found.get("metadata") or {}).get("uid"))
