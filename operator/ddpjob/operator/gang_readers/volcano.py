"""`gang: volcano`: why Volcano has not admitted the gang, from its PodGroup's Events.

Volcano (seen on v1.10.0, tests/gangs/test_volcano_real.py) writes on each unplaced Pod
only `pod group is not ready, 4 Pending, 4 minAvailable; Pending: 4 Unschedulable`,
whatever holds the gang. Why its enqueue action has not admitted the PodGroup (it stays
in phase `Pending`) is said only in an Event on the PodGroup, type Normal, reason
`Unschedulable`: `queue resource quota insufficient` (the proportion and capacity
plugins: the Queue's capability), `resource in cluster is overused` (overcommit). A user
reading `kubectl get ddpj` would not learn that their queue is full.

So while the PodGroup is `Pending` this reads the newest such Event (`list` events, one
field selector), and the job's message says it first: `Scheduled 0/4: queue research:
queue resource quota insufficient; pod group is not ready, ...`. Once admitted, the Pods'
words (Volcano's allocate action) say what holds them.
"""

from __future__ import annotations

from urllib.parse import quote

from ddpjob import text
from ddpjob.backoff import Backoff
from ddpjob.operator.gang_readers.base import Reader
from ddpjob.operator.kube import Kube, object_path
from ddpjob.render.gangs.volcano import API

# Volcano's PodGroup phase before its enqueue action admits it (apis scheduling/v1beta1).
PENDING = "Pending"
# The PodScheduled reason Volcano leaves on a Pod it cannot place (the scheduler framework's).
UNSCHEDULABLE = "Unschedulable"


async def read(kube: Kube, namespace: str, group: str) -> tuple[str | None, str] | None:
    """(None: the Pods' reason stays, `queue <name>: <Volcano's words>`) while the
    PodGroup is not admitted, else None."""
    pod_group = await kube.get(object_path(API, "PodGroup", namespace, group))
    if ((pod_group.get("status") or {}).get("phase") or PENDING) != PENDING:
        return None  # admitted: the Pods' condition says what its allocate action found
    uid = (pod_group.get("metadata") or {}).get("uid")
    selector = quote(f"involvedObject.uid={uid},reason=Unschedulable,type=Normal")
    events = (await kube.get(f"/api/v1/namespaces/{namespace}/events?fieldSelector={selector}")).get("items") or []
    queue = (pod_group.get("spec") or {}).get("queue") or "default"
    if not events:
        return None, f"queue {queue}: not admitted yet"
    newest = max(events, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
    return None, f"queue {queue}: {text.clean(newest.get('message') or 'not admitted yet')}"


READER = Reader("volcano", held=UNSCHEDULABLE, read=read, recheck=Backoff(base=5.0, cap=120.0))
