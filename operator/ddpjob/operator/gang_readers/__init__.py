"""What a gang's scheduler or queue says of its waiting Pods that the Pods do not carry,
read from the integration's own objects: one module per integration that has more to
say (kueue.py: the Workload; volcano.py: the PodGroup's Events), behind this registry.

Part of observing a job: before each plan, while Pods of the attempt are held in the way
the job's integration holds them (Kueue: at its scheduling gate; Volcano: unschedulable),
the reader reads once, and the plan sees `decision.GangSaid`. The reconcile comes back to
read again with the integration's backoff while the Pods stay held. A read that fails
(the chart's RBAC without that integration, a 404 before the object exists, an API
hiccup) leaves the Pods' own words; a refusal is logged once per integration and status.
"""

from __future__ import annotations

import logging
import random
from typing import Any, Iterable, Mapping

from ddpjob.api import names
from ddpjob.job.decision import GangSaid
from ddpjob.job.observe import PodState
from ddpjob.job.queue_wait import gated_by_queue
from ddpjob.operator.gang_readers import kueue, volcano
from ddpjob.operator.gang_readers.base import Reader
from ddpjob.operator.kube import APIError, Kube, NotFound

logger = logging.getLogger("ddpjob.operator.gang_readers")

READERS: dict[str, Reader] = {r.gang: r for r in (kueue.READER, volcano.READER)}


def held(body: Mapping[str, Any], pods: Iterable[PodState]) -> tuple[Reader, int] | None:
    """The job's reader and the attempt whose Pods its integration holds, else None."""
    reader = READERS.get(((body.get("spec") or {}).get("scheduling") or {}).get("gang") or "")
    if reader is None:
        return None
    attempts = [p.restart_count for p in pods if p.scheduling_reason == reader.held
                and not p.scheduled and not p.deleting and not p.leftover]
    return (reader, max(attempts)) if attempts else None


class GangReaders:
    """Reads through the operator's client into each job's memory (`JobMemory.gang_said`)."""

    def __init__(self, kube: Kube):
        self.kube = kube
        self._warned: set[tuple[str, int]] = set()

    async def read(self, job: Any, body: Mapping[str, Any], pods: Iterable[PodState]) -> float | None:
        """Read for `job` (its `JobMemory`) if its gang is held; returns when to read
        again (seconds), None while nothing holds it."""
        found = held(body, pods)
        if found is None:
            job.gang_said, job.gang_reads = None, 0
            return None
        reader, attempt = found
        group = names.pod_group_name((body.get("metadata") or {}).get("name") or "", attempt)
        said = await self._read(reader, job.key[0], group)
        job.gang_said = GangSaid(attempt, reader.held, said[1], said[0], gated_by_queue(reader.held)) if said else None
        job.gang_reads += 1
        return reader.recheck.delay(job.gang_reads, random.random())

    async def _read(self, reader: Reader, namespace: str, group: str) -> tuple[str | None, str] | None:
        try:
            return await reader.read(self.kube, namespace, group)
        except NotFound:
            return None  # not made yet (or gone): the Pods' words stay
        except APIError as exc:
            if (reader.gang, exc.status) not in self._warned:
                self._warned.add((reader.gang, exc.status))
                logger.warning("cannot read what %s says of %s/%s (%s %s): a waiting job shows its Pods' words "
                               "alone", reader.gang, namespace, group, exc.status, exc.reason)
            return None
