"""Gang scheduling, pure: the PodGroup of one gang attempt and what each Pod carries to join it.

One function per integration (`spec.scheduling.gang`):

- kubernetes: a `scheduling.k8s.io/v1beta1` PodGroup (`schedulingPolicy.gang.minCount`) and
  `spec.schedulingGroup.podGroupName` on every Pod. The default scheduler holds the Pods until
  the group exists and minCount Pods are created, then places them all or none
  (https://kubernetes.io/docs/concepts/scheduling-eviction/gang-scheduling/; Kubernetes 1.37,
  GenericWorkload feature gate). The docs' order is PodGroup, then Pods
  (https://kubernetes.io/docs/concepts/workloads/podgroup-api/lifecycle/).
- volcano: a `scheduling.volcano.sh/v1beta1` PodGroup (minMember, minResources, queue,
  priorityClassName); Pods name it in the `scheduling.k8s.io/group-name` annotation
  (volcano-sh/apis pkg/apis/scheduling/v1beta1/labels.go, KubeGroupNameAnnotationKey) and set
  `schedulerName: volcano`.
- coscheduling (kubernetes-sigs/scheduler-plugins): a `scheduling.x-k8s.io/v1alpha1` PodGroup
  (minMember >= 1, scheduleTimeoutSeconds) and the `scheduling.x-k8s.io/pod-group` label
  (apis/scheduling/v1alpha1/types.go PodGroupLabel); the scheduler's name is the chart's
  (`scheduler-plugins-scheduler` when run as a second scheduler, doc/install.md).
- kueue: no object of ours. Kueue's plain-Pod integration groups Pods by the
  `kueue.x-k8s.io/pod-group-name` label, admits the group through the LocalQueue named by
  `kueue.x-k8s.io/queue-name` once `kueue.x-k8s.io/pod-group-total-count` Pods exist
  (https://kueue.sigs.k8s.io/docs/tasks/run/plain_pods/), and makes a Workload of the same
  name. Its webhook adds the `kueue.x-k8s.io/admission` scheduling gate and the
  `kueue.x-k8s.io/managed` finalizer itself; we add neither. "Kueue does not re-create failed
  Pods ... It is the responsibility of the ... controller that created the original Pods to
  create replacement Pods": replacements carrying the same group label rejoin the Workload
  (which keeps its admission), and Kueue finalizes the failed Pods they replace. So the group
  name is the job's name for every attempt, and a gang restart is exactly such a replacement.
  Replacements must have the same admission-relevant shape (Kueue's role hash covers the
  containers' resources and ports, node selector, tolerations, affinity, priority), which
  every attempt of a job has; env and names differ per rank and are not part of it. We do not
  set `kueue.x-k8s.io/retriable-in-group: "false"`: a preempted gang must stay retriable;
  the Workload is owned by the Pods and goes with them when the DDPJob is deleted.

Each PodGroup-based attempt gets its own PodGroup (`names.pod_group_name`), owned by the
DDPJob; the operator deletes the one of an attempt that ended.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ddpjob.api import names
from ddpjob.api.spec import DDPJob

NATIVE_API = "scheduling.k8s.io/v1beta1"
VOLCANO_API = "scheduling.volcano.sh/v1beta1"
COSCHEDULING_API = "scheduling.x-k8s.io/v1alpha1"

VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
COSCHEDULING_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
KUEUE_TOTAL_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"

# The PodGroup of each integration, as (apiVersion, kind); kueue has none.
POD_GROUP_KINDS = {
    "kubernetes": (NATIVE_API, "PodGroup"),
    "volcano": (VOLCANO_API, "PodGroup"),
    "coscheduling": (COSCHEDULING_API, "PodGroup"),
}


@dataclass(frozen=True)
class GangOptions:
    """Cluster-side settings (the operator's chart values), not the job's."""
    volcano_scheduler: str = "volcano"
    coscheduling_scheduler: str = "scheduler-plugins-scheduler"


DEFAULT_OPTIONS = GangOptions()


def pod_group_name(job: DDPJob, attempt: int) -> str | None:
    if job.scheduling.gang in POD_GROUP_KINDS:
        return names.pod_group_name(job.name, attempt)
    if job.scheduling.gang == "kueue":
        return job.name
    return None


def render_pod_group(job: DDPJob, attempt: int, pods: list[dict], owner_references: list[dict],
                     labels: dict[str, str]) -> dict | None:
    """The PodGroup of attempt `attempt` (None when the integration has none).
    `pods` are the attempt's rendered Pods (Volcano's minResources is their sum). Its
    minimum is `job.min_nodes`: every node of a rigid gang, `elastic.minNodes` otherwise."""
    gang = job.scheduling.gang
    if gang not in POD_GROUP_KINDS:
        return None
    api_version, kind = POD_GROUP_KINDS[gang]
    meta: dict[str, Any] = {"name": pod_group_name(job, attempt), "namespace": job.namespace, "labels": labels}
    if owner_references:
        meta["ownerReferences"] = owner_references
    sched = job.scheduling
    spec: dict[str, Any]
    if gang == "kubernetes":
        spec = {"schedulingPolicy": {"gang": {"minCount": job.min_nodes}}}
        if sched.priority_class_name:
            spec["priorityClassName"] = sched.priority_class_name
    elif gang == "volcano":
        # minResources lets Volcano's enqueue action admit the group only when the queue
        # can hold all of it; "if queue does not exist, the PodGroup will not be scheduled".
        spec = {"minMember": job.min_nodes, "queue": sched.queue or "default",
                "minResources": sum_requests(pods[:job.min_nodes])}
        if sched.priority_class_name:
            spec["priorityClassName"] = sched.priority_class_name
    else:
        spec = {"minMember": job.min_nodes}
        if sched.schedule_timeout_seconds:
            spec["scheduleTimeoutSeconds"] = sched.schedule_timeout_seconds
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec}


def apply_to_pod(pod: dict, job: DDPJob, attempt: int, options: GangOptions = DEFAULT_OPTIONS) -> dict:
    """Add the gang's fields to a rendered Pod (after the user's template: these win)."""
    sched = job.scheduling
    meta, spec = pod["metadata"], pod["spec"]
    if sched.priority_class_name:
        spec["priorityClassName"] = sched.priority_class_name
    group = pod_group_name(job, attempt)
    if sched.gang == "kubernetes":
        # All Pods of a group must use the same scheduler: the default one.
        spec.pop("schedulerName", None)
        spec["schedulingGroup"] = {"podGroupName": group}
    elif sched.gang == "volcano":
        spec["schedulerName"] = options.volcano_scheduler
        meta.setdefault("annotations", {})[VOLCANO_GROUP_ANNOTATION] = group
    elif sched.gang == "coscheduling":
        spec["schedulerName"] = options.coscheduling_scheduler
        meta["labels"][COSCHEDULING_GROUP_LABEL] = group
    elif sched.gang == "kueue":
        meta["labels"][KUEUE_QUEUE_LABEL] = sched.queue
        meta["labels"][KUEUE_GROUP_LABEL] = group
        meta.setdefault("annotations", {})[KUEUE_TOTAL_ANNOTATION] = str(job.nodes)
    return pod


# ---- quantities (Volcano's minResources) ------------------------------------------------

_SUFFIX = {"": 1, "m": Decimal("0.001"), "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15,
           "E": 10**18, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")


def parse_quantity(value: str | int | float) -> Decimal:
    """A Kubernetes quantity ('500m', '4Gi', 2) as a number (resource.Quantity's suffixes)."""
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise ValueError(f"not a quantity: {value!r}")
    return Decimal(match.group(1)) * Decimal(_SUFFIX[match.group(2) or ""])


def format_quantity(value: Decimal, binary: bool = False) -> str:
    """Whole numbers as they are (bytes in the largest binary unit that divides them),
    fractions in milli-units."""
    if value == value.to_integral_value():
        whole = int(value)
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki") if binary and whole else ():
            if whole % _SUFFIX[suffix] == 0:
                return f"{whole // _SUFFIX[suffix]}{suffix}"
        return str(whole)
    return f"{int((value * 1000).to_integral_value())}m"


def sum_requests(pods: list[dict]) -> dict[str, str]:
    """The Pods' requests added up, as the scheduler counts them: a container's limit is
    its request where no request is given (the API server defaults it so)."""
    total: dict[str, Decimal] = {}
    for pod in pods:
        for container in pod["spec"].get("containers", []):
            res = container.get("resources") or {}
            requests = {**(res.get("limits") or {}), **(res.get("requests") or {})}
            for key, qty in requests.items():
                total[key] = total.get(key, Decimal(0)) + parse_quantity(qty)
    return {key: format_quantity(v, binary=key in _BYTES or key.startswith("hugepages-"))
            for key, v in sorted(total.items())}


_BYTES = ("memory", "ephemeral-storage")
