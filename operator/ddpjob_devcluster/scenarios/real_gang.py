"""The gang deadlock scenario (`gang.py`) on the real control plane: two 4-node
jobs on six 1-GPU process-kubelet Nodes, placed by a real scheduler (kube-scheduler for
`none` and `kubernetes`, scheduler-plugins' for `coscheduling`, ...), with the operator
installed from the chart with that integration's values and RBAC.

What makes the interleaving deterministic is the same as on the emulator: the operator
talks to kube-apiserver through `fault_proxy.FaultProxy`, which holds job A's fourth Pod
create back for `slow_create` seconds, so job B's four Pods reach the server between
A's third and fourth. Without a gang the scheduler then binds 3 + 3 and both jobs wait
for ever; with one, the gang that is whole runs first.

Bindings are timed by a watch on the namespace's Pods (the moment `spec.nodeName` first
appears in an event), not from the Pods' PodScheduled condition, whose time has
one-second resolution.
"""
from __future__ import annotations

import pathlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import kubernetes

from ddpjob.api import names
from ddpjob.api.quantity import parse_quantity
from ddpjob_devcluster.scenarios.chaos import Chaos
from ddpjob_devcluster.clusters.client import wait_until
from ddpjob_devcluster.controlplane.node import NodeShape
from ddpjob_devcluster.scenarios.fault_proxy import FaultProxy, SlowCreate, point_kubeconfig_at
from ddpjob_devcluster.scenarios.gang import JOB_NODES, NODES, Result, idle_seconds, job_body
from ddpjob_devcluster.clusters.real import RealCluster

GPU_NODES = tuple(NodeShape(f'gpu-{i}', cpu='8', memory='32Gi', gpus=1) for i in range(NODES))
JOBS = ('job-a', 'job-b')


@dataclass
class Binding:
    """One Pod bound to a Node, as `gang.idle_seconds` reads it."""
    pod: str
    labels: dict[str, str]
    requests: dict[str, Decimal]
    time: float


@dataclass
class BindingWatch:
    """Records each Pod's first binding in `namespace`, from a watch, until `stop()`."""
    core: kubernetes.client.CoreV1Api
    namespace: str
    bindings: list[Binding] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> BindingWatch:
        self._thread = threading.Thread(target=self._run, name='binding-watch', daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[Binding]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15)  # the watch's own timeout ends it at the latest
        return sorted(self.bindings, key=lambda b: b.time)

    def _run(self) -> None:
        seen: set[str] = set()
        while not self._stop.is_set():
            # Short server-side timeouts, so stop() is heard within seconds.
            stream = kubernetes.watch.Watch().stream(self.core.list_namespaced_pod, self.namespace, timeout_seconds=2)
            for event in stream:
                pod = event['object']
                if pod.spec.node_name and pod.metadata.uid not in seen:
                    seen.add(pod.metadata.uid)
                    requests: dict[str, Decimal] = {}
                    for c in pod.spec.containers:
                        for key, qty in ((c.resources.limits or {}) | (c.resources.requests or {})).items():
                            requests[key] = requests.get(key, Decimal(0)) + parse_quantity(qty)
                    self.bindings.append(Binding(pod.metadata.name, dict(pod.metadata.labels or {}), requests,
                                                 time.time()))
                if self._stop.is_set():
                    break


def run(plane: Any, workdir: str | pathlib.Path, gang: str, *, values: dict[str, Any] | None = None,
        scheduling: Callable[[RealCluster], dict[str, Any]] | None = None,
        prepare: Callable[[RealCluster], None] | None = None,
        deadlock_wait: float = 10.0, finish_timeout: float = 120.0, work_seconds: float = 2.0,
        slow_create: float = 4.0) -> Result:
    """values: the chart's values for the integration (default: `gang.<gang>.enabled`);
    scheduling: more of `spec.scheduling` for the cluster (a Kueue queue named after its
    namespace); prepare: objects the integration needs (queues), made before the jobs."""
    if values is None:
        values = {} if gang == 'none' else {'gang': {gang: {'enabled': True}}}
    cluster = RealCluster(pathlib.Path(workdir) / 'cluster', plane=plane, nodes=GPU_NODES, stop_grace=1.0,
                          values=values)
    proxy = FaultProxy(plane.server, plane.ca, Chaos(rate=0.0, watch_lifetime=None),
                       slow=SlowCreate('pods', slow_create, skip=JOB_NODES - 1))
    watch = None
    try:
        cluster.start(operator=False)
        if prepare is not None:
            prepare(cluster)
        proxy.start()
        assert cluster.operator is not None
        point_kubeconfig_at(cluster.operator.kubeconfig, proxy.url)
        cluster.operator.start()
        watch = BindingWatch(cluster.core, cluster.namespace).start()
        start = time.time()
        extra = scheduling(cluster) if scheduling is not None else {}

        def body(name: str) -> dict[str, Any]:
            return _with_scheduling(job_body(name, gang, work_seconds), extra)

        cluster.create_job(body('job-a'))
        wait_until(lambda: len(cluster.pods('job-a')) >= JOB_NODES - 1, 30, 'job-a has 3 Pods')
        cluster.create_job(body('job-b'))
        wait_until(lambda: len(cluster.pods('job-a')) + len(cluster.pods('job-b')) == 2 * JOB_NODES, 30,
                   'all 8 Pods exist')
        deadlocked = False
        if gang == 'none':
            def both_stuck() -> bool:
                st = [cluster.status(j) for j in JOBS]
                return all(s.get('scheduledNodes') == JOB_NODES - 1 and
                           s.get('message', '').startswith('Scheduled 3/4') for s in st)
            wait_until(both_stuck, 60, 'both jobs report Scheduled 3/4',
                       lambda: [cluster.status(j).get('message') for j in JOBS])
            time.sleep(deadlock_wait)  # the bounded wait: nothing may change in it
            deadlocked = both_stuck() and not any(cluster.status(j).get('phase') in ('Succeeded', 'Failed')
                                                  for j in JOBS)
        else:
            wait_until(lambda: all(cluster.status(j).get('phase') in ('Succeeded', 'Failed') for j in JOBS),
                       finish_timeout, 'both jobs finish', lambda: [cluster.status(j).get('message') for j in JOBS])
        end = time.time()
        bindings = watch.stop()
        watch = None
        idle, order = idle_seconds(bindings, end)
        statuses = {j: cluster.status(j) for j in JOBS}
        return Result(gang=gang, finished={j: s.get('phase', '') for j, s in statuses.items()},
                      scheduled={j: s.get('scheduledNodes', 0) for j, s in statuses.items()},
                      messages={j: s.get('message', '') for j, s in statuses.items()},
                      idle_gpu_seconds=idle, wall_seconds=end - start, order=order, deadlocked=deadlocked,
                      bindings=[(b.labels.get(names.LABEL_JOB_NAME, ''), b.time - start) for b in bindings])
    finally:
        if watch is not None:
            watch.stop()
        cluster.stop()
        proxy.stop()


def _with_scheduling(body: dict[str, Any], scheduling: dict[str, Any]) -> dict[str, Any]:
    body['spec']['scheduling'].update(scheduling)
    return body
