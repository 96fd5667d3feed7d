"""Volcano: a `scheduling.volcano.sh/v1beta1` PodGroup (minMember, minResources, queue,
priorityClassName); Pods name it in the `scheduling.k8s.io/group-name` annotation
(volcano-sh/apis pkg/apis/scheduling/v1beta1/labels.go, KubeGroupNameAnnotationKey) and set
`schedulerName: volcano` (the chart's name for it).

What it says of a gang it holds: Volcano (seen on v1.10.0, tests/gangs/test_volcano_real.py)
writes on each unplaced Pod only `pod group is not ready, 4 Pending, 4 minAvailable;
Pending: 4 Unschedulable`, whatever holds the gang. Why its enqueue action has not admitted
the PodGroup (it stays in phase `Pending`) is said only in an Event on the PodGroup, type
Normal, reason `Unschedulable`: `queue resource quota insufficient` (the proportion and
capacity plugins: the Queue's capability), `resource in cluster is overused` (overcommit).
So while the PodGroup is `Pending` the newest such Event is read (`list` events, one field
selector), and the job's message says it first: `Scheduled 0/4: queue research: queue
resource quota insufficient; pod group is not ready, ...`. Once admitted, the Pods' words
(Volcano's allocate action) say what holds them.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any
from urllib.parse import quote

from ddpjob import text
from ddpjob.api.gangs.base import GangJob, Integration, Objects, PodGroupKind, Reads, SchedulerSetting
from ddpjob.api.quantity import format_quantity, is_bytes, parse_quantity
from ddpjob.backoff import Backoff

API = "scheduling.volcano.sh/v1beta1"
POD_GROUP = PodGroupKind(API, "PodGroup", "podgroups")
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
# Volcano's PodGroup phase before its enqueue action admits it (apis scheduling/v1beta1).
PENDING = "Pending"
# The PodScheduled reason Volcano leaves on a Pod it cannot place (the scheduler framework's).
UNSCHEDULABLE = "Unschedulable"


def pod_requests(pod: dict[str, Any]) -> dict[str, Decimal]:
    """One Pod's requests, as the scheduler counts them: a container's limit is its
    request where no request is given (the API server defaults it so)."""
    total: dict[str, Decimal] = {}
    for container in pod["spec"].get("containers", []):
        res = container.get("resources") or {}
        for key, qty in {**(res.get("limits") or {}), **(res.get("requests") or {})}.items():
            total[key] = total.get(key, Decimal(0)) + parse_quantity(qty)
    return total


def gang_requests(pod: dict[str, Any], nodes: int) -> dict[str, str]:
    """What the whole gang requests: one Pod's requests times the nodes (every Pod of a
    gang has the same resources; only names and env differ per rank)."""
    return {key: format_quantity(qty * nodes, binary=is_bytes(key)) for key, qty in sorted(pod_requests(pod).items())}


def pod_group_spec(job: GangJob, pod: dict[str, Any]) -> dict[str, Any]:
    # minResources lets Volcano's enqueue action admit the group only when the queue
    # can hold all of it; "if queue does not exist, the PodGroup will not be scheduled".
    spec: dict[str, Any] = {
        "minMember": job.min_nodes,
        "queue": job.scheduling.queue or "default",
        "minResources": gang_requests(pod, job.min_nodes),
    }
    if job.scheduling.priority_class_name:
        spec["priorityClassName"] = job.scheduling.priority_class_name
    return spec


def join(pod: dict[str, Any], job: GangJob, group: str, scheduler: str | None) -> None:
    if scheduler:
        pod["spec"]["schedulerName"] = scheduler
    pod["metadata"].setdefault("annotations", {})[GROUP_ANNOTATION] = group


def _pending(pod_group: Any) -> bool:
    return ((pod_group.get("status") or {}).get("phase") or PENDING) == PENDING


def next_read(namespace: str, group: str, read: Objects) -> str | None:
    """The PodGroup; then, while it is not admitted, its Unschedulable Events."""
    if not read:
        return f"/apis/{API}/namespaces/{namespace}/podgroups/{group}"
    if len(read) == 1 and _pending(read[0]):
        uid = (read[0].get("metadata") or {}).get("uid")
        selector = quote(f"involvedObject.uid={uid},reason=Unschedulable,type=Normal")
        return f"/api/v1/namespaces/{namespace}/events?fieldSelector={selector}"
    return None


def verdict(read: Objects) -> tuple[str | None, str] | None:
    """(None: the Pods' reason stays, `queue <name>: <Volcano's words>`) while the
    PodGroup is not admitted, else None."""
    if len(read) < 2 or not _pending(read[0]):
        return None  # admitted: the Pods' condition says what its allocate action found
    queue = (read[0].get("spec") or {}).get("queue") or "default"
    events = [e for e in read[1].get("items") or [] if hasattr(e, "get")]
    if not events:
        return None, f"queue {queue}: not admitted yet"
    newest = max(events, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    return None, f"queue {queue}: {text.clean(newest.get('message') or 'not admitted yet')}"


INTEGRATION = Integration(
    name="volcano",
    needs="Volcano's scheduling.volcano.sh/v1beta1 PodGroup CRD (install Volcano)",
    pod_group=POD_GROUP,
    pod_group_spec=pod_group_spec,
    join=join,
    queue="Queue",
    scheduler=SchedulerSetting("DDPJOB_VOLCANO_SCHEDULER", "volcano"),
    reads=Reads(held=UNSCHEDULABLE, next=next_read, verdict=verdict, recheck=Backoff(base=5.0, cap=120.0)),
)
