"""A kube-scheduler for the development cluster: Nodes with GPU capacity, Pods placed one
at a time, and all-or-nothing placement of a `scheduling.k8s.io/v1beta1` PodGroup.

It runs in the emulator's process and reads and writes the emulator's store directly, as
the real scheduler reads its informers and writes bindings and Pod status. What it models,
each as the upstream scheduler does it:

- The queue: Pods of the default scheduler (`spec.schedulerName` empty or
  `default-scheduler`; others belong to another scheduler and stay Pending) that have no
  `spec.nodeName`, in the order of `spec.priority` (higher first) and then of when the
  scheduler first saw them (the PrioritySort plugin orders by priority, then queue time).
  One Pod at a time: a Pod is bound as soon as it fits, whatever its peers do, so a gang
  can be placed in part (pkg/scheduler/schedule_one.go schedules one Pod per cycle).
- Filtering (NodeResourcesFit, NodeName/NodeSelector; `node_fit.py`): a Node fits when its
  `status.allocatable` minus the requests of the Pods bound to it and not finished covers
  the Pod's requests (a container's limit stands for a missing request), and one more
  Pod fits under `allocatable.pods`. A Pod that fits nowhere gets
  `PodScheduled=False, reason Unschedulable` with the FitError message of
  pkg/scheduler/framework/types.go: `0/6 nodes are available: 6 Insufficient nvidia.com/gpu.`
  (each reason counted over the Nodes, sorted). Preemption is not modelled, so no
  "preemption: ..." tail is appended.
- Binding: `spec.nodeName` and `PodScheduled=True` (what the pods/binding subresource does).
- Scheduling gates: a gated Pod is never placed; it carries
  `PodScheduled=False, reason SchedulingGated` (which the API server sets at creation,
  pkg/registry/core/pod/strategy.go; written here because the emulator does not).
- Gang scheduling (https://kubernetes.io/docs/concepts/scheduling-eviction/gang-scheduling/):
  a Pod whose `spec.schedulingGroup.podGroupName` names a PodGroup waits (PreEnqueue, no
  condition) until the PodGroup exists and at least `minCount` of its Pods exist; then the
  group's unbound Pods are placed all at once if they all fit, else none is, and each
  gets `PodScheduled=False, Unschedulable`: the Pod that did not fit its FitError, the
  others kube-scheduler 1.37's `pod group is unschedulable, minCount (N) cannot be
  satisfied: S scheduled, R remaining` (gangscheduling.go PlacementFeasible; its
  preemption tail is not modelled).
- The PodGroup API and its protection finalizer: `pod_groups.py`.

Not modelled: taints, affinity beyond nodeSelector, scoring beyond "most free GPUs first"
(the default LeastAllocated scoring also spreads), preemption, nominated nodes.
"""

from __future__ import annotations

import copy
import itertools
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kmock import resource as Resource

from ddpjob.times import now as _now
from ddpjob_devcluster.apiserver.errors import ApiError
from ddpjob_devcluster.apiserver.registry.store import Store
from ddpjob_devcluster.scheduler import pod_groups
from ddpjob_devcluster.scheduler.node_fit import allocatable, find_node, holds_resources, pod_requests, take
from ddpjob_devcluster.scheduler.pod_groups import POD_GROUPS

PODS = Resource(group="", version="v1", plural="pods")
NODES = Resource(group="", version="v1", plural="nodes")
DEFAULT_SCHEDULER = "default-scheduler"
MERGE = "application/merge-patch+json"
GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"


@dataclass(frozen=True)
class NodeSpec:
    name: str
    gpus: int = 0
    gpu_resource: str = "nvidia.com/gpu"
    cpu: str = "64"
    memory: str = "512Gi"
    pods: int = 110
    labels: Mapping[str, str] = field(default_factory=dict)


def gpu_nodes(count: int, gpus: int = 1, prefix: str = "gpu-node") -> list[NodeSpec]:
    return [NodeSpec(f"{prefix}-{i}", gpus=gpus) for i in range(count)]


def node_object(spec: NodeSpec) -> dict[str, Any]:
    capacity = {"cpu": spec.cpu, "memory": spec.memory, "pods": str(spec.pods)}
    if spec.gpus:
        capacity[spec.gpu_resource] = str(spec.gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec.name, "labels": {"kubernetes.io/hostname": spec.name, **spec.labels}},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


@dataclass
class Binding:
    namespace: str
    pod: str
    node: str
    time: float
    labels: Mapping[str, str]
    requests: Mapping[str, Decimal]


class Scheduler:
    """`start()` runs it in a thread; `schedule_once()` is one pass (tests call it directly)."""

    def __init__(self, store: Store, *, interval: float = 0.05):
        self.store = store
        self.interval = interval
        self.bindings: list[Binding] = []  # every binding, in order (the benchmark reads it)
        self.errors: list[BaseException] = []
        self._seen: dict[str, int] = {}  # Pod uid -> queue order
        self._order = itertools.count()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- lifecycle ----

    def add_nodes(self, nodes: list[NodeSpec]) -> None:
        """Register Nodes as kubelets do: create the Node, then write its status (capacity)."""
        for spec in nodes:
            body = node_object(spec)
            try:
                self.store.create(NODES, None, body)
            except ApiError as exc:
                if exc.code != 409:
                    raise
            self.store.patch(NODES, None, spec.name, "status", MERGE, {"status": body["status"]})

    def start(self) -> Scheduler:
        self._thread = threading.Thread(target=self._loop, name="devcluster-scheduler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stopping.wait(self.interval):
            try:
                self.schedule_once()
            except ApiError:
                pass  # a Pod changed or went under us: the next pass sees the new state
            except BaseException as exc:  # noqa: BLE001 - surfaced through .errors, like the kubelet's
                self.errors.append(exc)

    # ---- one scheduling pass ----

    def schedule_once(self) -> int:
        nodes = sorted(self.store.view_all(NODES, None), key=lambda n: n["metadata"]["name"])
        pods = self.store.view_all(PODS, None)
        free = {n["metadata"]["name"]: allocatable(n) for n in nodes}
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if node in free and holds_resources(pod):
                take(free[node], pod_requests(pod))
        pod_groups.protect(self.store, pods)
        queue = [p for p in pods if self._queued(p)]
        for p in queue:
            self._seen.setdefault(p["metadata"]["uid"], next(self._order))
        queue.sort(key=lambda p: (-int((p.get("spec") or {}).get("priority") or 0), self._seen[p["metadata"]["uid"]]))
        bound = 0
        done_groups: set[tuple[str, str]] = set()
        for pod in queue:
            spec = pod.get("spec") or {}
            if spec.get("schedulingGates"):
                self._condition(pod, "False", "SchedulingGated", GATED_MESSAGE)
                continue
            group = (spec.get("schedulingGroup") or {}).get("podGroupName")
            if group:
                key = (pod["metadata"]["namespace"], group)
                if key not in done_groups:
                    done_groups.add(key)
                    bound += self._schedule_group(key, pods, nodes, free)
                continue
            node, message = find_node(pod, nodes, free)
            if node is None:
                self._condition(pod, "False", "Unschedulable", message)
            else:
                take(free[node], pod_requests(pod))
                self._bind(pod, node)
                bound += 1
        return bound

    def _schedule_group(
        self, key: tuple[str, str], pods: list[dict], nodes: list[dict], free: dict[str, dict[str, Decimal]]
    ) -> int:
        ns, name = key
        group = self.store.peek(POD_GROUPS, ns, name) if POD_GROUPS in self.store.resources else None
        if group is None:
            return 0  # PreEnqueue: "The referenced PodGroup object exists"
        members = pod_groups.members(group, pods)
        policy = (group.get("spec") or {}).get("schedulingPolicy") or {}
        min_count = int((policy.get("gang") or {}).get("minCount") or 1)
        if len(members) < min_count:
            return 0  # PreEnqueue: fewer than minCount Pods created
        waiting = [p for p in members if not (p.get("spec") or {}).get("nodeName")]
        waiting.sort(key=lambda p: self._seen.get(p["metadata"]["uid"], 0))
        trial = copy.deepcopy(free)
        placement: list[tuple[dict, str]] = []
        bound = len(members) - len(waiting)
        for i, pod in enumerate(waiting):
            if (pod.get("spec") or {}).get("schedulingGates"):
                return 0
            node, message = find_node(pod, nodes, trial)
            if node is None:  # all or nothing: the Pod that did not fit says why, the others
                # what the GangScheduling plugin's PlacementFeasible says (no preemption tail)
                scheduled, remaining = bound + len(placement), len(waiting) - i - 1
                group_message = (
                    f"pod group is unschedulable, minCount ({min_count}) cannot be satisfied: "
                    f"{scheduled} scheduled, {remaining} remaining"
                )
                for member in waiting:
                    self._condition(member, "False", "Unschedulable", message if member is pod else group_message)
                return 0
            take(trial[node], pod_requests(pod))
            placement.append((pod, node))
        for pod, node in placement:
            take(free[node], pod_requests(pod))
            self._bind(pod, node)
        return len(placement)

    # ---- helpers ----

    @staticmethod
    def _queued(pod: Mapping[str, Any]) -> bool:
        spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
        return (
            not spec.get("nodeName")
            and not meta.get("deletionTimestamp")
            and spec.get("schedulerName") in (None, "", DEFAULT_SCHEDULER)
            and (pod.get("status") or {}).get("phase", "Pending") == "Pending"
        )

    def _bind(self, pod: Mapping[str, Any], node: str) -> None:
        meta = pod["metadata"]
        ns, name = meta["namespace"], meta["name"]
        current = self.store.peek(PODS, ns, name)
        if current is None or current["metadata"]["uid"] != meta["uid"] or (current.get("spec") or {}).get("nodeName"):
            return
        # The condition first: once spec.nodeName is set the kubelet owns the status.
        self._condition(current, "True", None, None, force=True)
        self.store.patch(PODS, ns, name, None, MERGE, {"spec": {"nodeName": node}})
        self.bindings.append(Binding(ns, name, node, time.time(), dict(meta.get("labels") or {}), pod_requests(pod)))

    def _condition(
        self, pod: Mapping[str, Any], status: str, reason: str | None, message: str | None, force: bool = False
    ) -> None:
        meta = pod["metadata"]
        current = self.store.peek(PODS, meta["namespace"], meta["name"])
        if current is None or current["metadata"]["uid"] != meta["uid"]:
            return
        conds = list((current.get("status") or {}).get("conditions") or [])
        old = next((c for c in conds if c.get("type") == "PodScheduled"), None)
        unchanged = old and (old.get("status"), old.get("reason"), old.get("message")) == (status, reason, message)
        if not force and unchanged:
            return  # unchanged: no write, as the scheduler skips a no-op status update
        new = {
            "type": "PodScheduled",
            "status": status,
            "lastTransitionTime": (_now() if not old or old.get("status") != status else old.get("lastTransitionTime")),
        }
        if reason:
            new.update(reason=reason, message=message or "")
        conds = [c for c in conds if c.get("type") != "PodScheduled"] + [new]
        patch: dict[str, Any] = {"conditions": conds}
        if not (current.get("status") or {}).get("phase"):
            patch["phase"] = "Pending"
        self.store.patch(PODS, meta["namespace"], meta["name"], "status", MERGE, {"status": patch})
