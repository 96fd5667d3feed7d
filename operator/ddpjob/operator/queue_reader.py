"""Reads the queue's verdict on a gated `gang: kueue` job: its Kueue Workload.

Only while the job's Pods wait at a scheduling gate (the state in which the Workload says
more than the Pods): one GET of `kueue.x-k8s.io/v1beta2` workloads/<group> (Kueue names a
Pod group's Workload after the group, `<job>-attempt-<n>`: render/gangs/kueue.py) per
reconcile, and the reconcile comes back after 2, 4, ... at most 30 s while the gang
stays gated, since a Workload's condition changing sends the operator no event (it does
not watch Workloads). What it says is pure `job.queue_wait.waiting_reason`.

The chart grants `get` on workloads only with `gang.kueue.enabled`. A 404 (the Workload
not made yet; Kueue older than v1beta2) or any other refusal (403: the chart's RBAC
without Kueue) leaves the gate's own words; a refusal is logged once per status.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Mapping

from ddpjob.api import names
from ddpjob.backoff import Backoff
from ddpjob.job.observe import PodState
from ddpjob.job.queue_wait import gated_by_queue, waiting_reason
from ddpjob.operator.kube import APIError, Kube, NotFound

logger = logging.getLogger("ddpjob.operator.queue_reader")

API = "/apis/kueue.x-k8s.io/v1beta2"
RECHECK = Backoff(base=2.0, cap=30.0)


def workload_path(namespace: str, name: str) -> str:
    return f"{API}/namespaces/{namespace}/workloads/{name}"


def queued(body: Mapping[str, Any], pods: Iterable[PodState]) -> str | None:
    """The Workload of a `gang: kueue` job whose Pod of its own is held at a scheduling
    gate (the latest attempt's: its group's name, render/gangs/kueue.py), else None."""
    if (((body.get("spec") or {}).get("scheduling") or {}).get("gang")) != "kueue":
        return None
    held = [p.restart_count for p in pods
            if gated_by_queue(p.scheduling_reason) and not p.scheduled and not p.deleting and not p.leftover]
    name = (body.get("metadata") or {}).get("name") or ""
    return names.pod_group_name(name, max(held)) if held else None


class QueueReader:
    """Reads Workloads through the operator's client; says once per HTTP status that it cannot."""

    def __init__(self, kube: Kube):
        self.kube = kube
        self._warned: set[int] = set()

    async def read(self, namespace: str, name: str) -> tuple[str, str] | None:
        try:
            workload = await self.kube.get(workload_path(namespace, name))
        except NotFound:
            return None  # not made yet: Kueue makes it once the whole group's Pods exist
        except APIError as exc:
            if exc.status not in self._warned:
                self._warned.add(exc.status)
                logger.warning("cannot read Kueue Workload %s/%s (%s %s): a queued job shows the scheduling "
                               "gate's message instead of its queue's reason", namespace, name, exc.status,
                               exc.reason)
            return None
        return waiting_reason(workload)


def recheck_after(checks: int, requeue_after: float | None, jitter: float = 0.0) -> float | None:
    """When to look at a gated job again: its own timer or the queue's recheck, sooner."""
    if checks <= 0:
        return requeue_after
    delay = RECHECK.delay(checks, jitter)
    return delay if requeue_after is None else min(requeue_after, delay)
