"""The one reader of what a gang's integration says of its waiting Pods that the Pods do
not carry: it performs the reads the integration's description names
(`api/gangs/<name>.py`, `Integration.reads`: Kueue's Workload, Volcano's PodGroup and its
Events) and hands what they say, as the description reads it, to the job logic.

Part of observing a job: before each plan, while Pods of the attempt are held in the way
the job's integration holds them (Kueue: at its scheduling gate; Volcano: unschedulable),
the reader GETs the paths the description names, one after another (each may depend on
what the last said), and the plan sees `decision.GangSaid`. The reconcile comes back to
read again with the integration's backoff while the Pods stay held. A read that fails
(the chart's RBAC without that integration, a 404 before the object exists, an API
hiccup) leaves the Pods' own words; a refusal is logged once per integration and status.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable, Mapping
from typing import Any

from ddpjob.api import gangs
from ddpjob.api.gangs import Integration
from ddpjob.api.spec import DDPJob
from ddpjob.job.decision import GangSaid
from ddpjob.job.observe import PodState
from ddpjob.operator.kube import APIError, Kube, NotFound
from ddpjob.operator.observer import JobMemory

logger = logging.getLogger("ddpjob.operator.gang_reader")

# Reads of one pass, at most: a description that keeps naming paths is cut off here.
MAX_READS = 4


def held(job: DDPJob, pods: Iterable[PodState]) -> tuple[Integration, int] | None:
    """The job's integration and the attempt whose Pods it holds (and says more of), else None."""
    integration = gangs.get(job.scheduling.gang)
    if integration is None or integration.reads is None:
        return None
    attempts = [
        p.restart_count
        for p in pods
        if p.scheduling_reason == integration.reads.held and not p.scheduled and not p.deleting and not p.leftover
    ]
    return (integration, max(attempts)) if attempts else None


class GangReader:
    """Reads through the operator's client into each job's memory (`JobMemory.gang_said`)."""

    def __init__(self, kube: Kube):
        self.kube = kube
        self._warned: set[tuple[str, int]] = set()

    async def read(self, job: JobMemory, parsed: DDPJob | None, pods: Iterable[PodState]) -> float | None:
        """Read for `job` if its gang is held; returns when to read again (seconds), None
        while nothing holds it."""
        found = held(parsed, pods) if parsed is not None else None
        if found is None or parsed is None:
            job.gang_said, job.gang_reads = None, 0
            return None
        integration, attempt = found
        reads = integration.reads
        assert reads is not None  # held() found it
        said = await self._read(integration, job.key[0], integration.group_name(parsed, attempt))
        job.gang_said = GangSaid(attempt, reads.held, said[1], said[0], reads.replaces) if said else None
        job.gang_reads += 1
        return reads.recheck.delay(job.gang_reads, random.random())

    async def _read(self, integration: Integration, namespace: str, group: str) -> tuple[str | None, str] | None:
        reads = integration.reads
        assert reads is not None
        read: list[Mapping[str, Any]] = []
        try:
            while len(read) < MAX_READS and (path := reads.next(namespace, group, tuple(read))) is not None:
                read.append(await self.kube.get(path) or {})
        except NotFound:
            return None  # not made yet (or gone): the Pods' words stay
        except APIError as exc:
            if (integration.name, exc.status) not in self._warned:
                self._warned.add((integration.name, exc.status))
                logger.warning(
                    "cannot read what %s says of %s/%s (%s %s): a waiting job shows its Pods' words alone",
                    integration.name,
                    namespace,
                    group,
                    exc.status,
                    exc.reason,
                )
            return None
        return reads.verdict(tuple(read))
