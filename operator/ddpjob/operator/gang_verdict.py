"""What a gang scheduler says of a waiting gang that its Pods' conditions do not.

Volcano (seen on v1.10.0, tests/gangs/test_volcano_real.py) writes on each unplaced Pod
only `pod group is not ready, 4 Pending, 4 minAvailable; Pending: 4 Unschedulable`,
whatever holds the gang. Why its enqueue action has not admitted the PodGroup (it stays
in phase `Pending`) is said only in an Event on the PodGroup, type Normal, reason
`Unschedulable`: `queue resource quota insufficient` (the proportion and capacity
plugins: the Queue's capability), `resource in cluster is overused` (overcommit). A user
reading `kubectl get ddpj` would not learn that their queue is full.

So while a `gang: volcano` job waits with Volcano's verdict on its Pods, the controller
reads the attempt's PodGroup (`get`) and, while it is `Pending`, the newest such Event
(`list` events, one field selector), and the job's message says it first:
`Scheduled 0/4: queue research: queue resource quota insufficient; pod group is not
ready, ...`. Read again with backoff (5 s .. 2 min) while the gang waits: a queue that
frees up changes the verdict without any Pod changing. A read that fails (the chart's
RBAC without events `list`, an API hiccup) leaves the message as the Pods have it.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping
from urllib.parse import quote

from ddpjob import text
from ddpjob.api import names, spec
from ddpjob.backoff import Backoff
from ddpjob.job import scheduling
from ddpjob.job.decision import FINISHED, SUSPENDED
from ddpjob.operator.kube import APIError, Kube, object_path
from ddpjob.render.gangs.volcano import API

logger = logging.getLogger("ddpjob.operator.gang_verdict")

REFRESH = Backoff(base=5.0, cap=120.0)
# The reasons of a GangScheduled=False that the gang scheduler itself gave (not one of
# the operator's own: integration unavailable, PodGroup terminating, Pods not created).
_SCHEDULER_SPOKE = ("Unschedulable", scheduling.TIMEOUT_REASON)
# Volcano's PodGroup phase before its enqueue action admits it (apis scheduling/v1beta1).
PENDING = "Pending"


def waiting(status: Mapping[str, Any]) -> bool:
    """Held by the gang scheduler now (a finished or suspended job keeps its last
    GangScheduled condition: nothing to read for it)."""
    if status.get("phase") in (*FINISHED, SUSPENDED):
        return False
    cond = next((c for c in status.get("conditions") or [] if c.get("type") == scheduling.CONDITION), None)
    return bool(cond) and cond.get("status") == "False" and cond.get("reason") in _SCHEDULER_SPOKE


async def refresh(kube: Kube, job: Any, parsed: spec.DDPJob | None, status: Mapping[str, Any]) -> tuple[bool, float | None]:
    """Read the verdict of a waiting Volcano gang into `job` (its `JobMemory`). Returns
    (whether it changed: step again now, seconds until the next read or None)."""
    if parsed is None or parsed.scheduling.gang != "volcano" or not waiting(status):
        job.gang_verdict, job.verdict_reads = None, 0
        return False, None
    attempt = int(status.get("restarts", 0))
    words = await read_volcano(kube, job.key[0], names.pod_group_name(parsed.name, attempt))
    new = (attempt, words) if words else None
    changed, job.gang_verdict = new != job.gang_verdict, new
    job.verdict_reads += 1
    return changed, REFRESH.delay(job.verdict_reads)


async def read_volcano(kube: Kube, namespace: str, group: str) -> str | None:
    """`queue <name>: <Volcano's words>` while the PodGroup is not admitted, else None."""
    try:
        pod_group = await kube.get(object_path(API, "PodGroup", namespace, group))
        if ((pod_group.get("status") or {}).get("phase") or PENDING) != PENDING:
            return None  # admitted: the Pods' condition says what its allocate action found
        uid = (pod_group.get("metadata") or {}).get("uid")
        selector = quote(f"involvedObject.uid={uid},reason=Unschedulable,type=Normal")
        events = (await kube.get(f"/api/v1/namespaces/{namespace}/events?fieldSelector={selector}")).get("items") or []
    except APIError as exc:
        logger.debug("%s/%s: Volcano's verdict not read: %s", namespace, group, exc)
        return None
    queue = (pod_group.get("spec") or {}).get("queue") or "default"
    if not events:
        return f"queue {queue}: not admitted yet"
    newest = max(events, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
    return f"queue {queue}: {text.clean(newest.get('message') or 'not admitted yet')}"
