"""The gang deadlock scenario (`gang.py`) on the real control plane: two 4-node
jobs on six 1-GPU process-kubelet Nodes, placed by a real scheduler (kube-scheduler for
`none` and `kubernetes`, scheduler-plugins' for `coscheduling`, ...), with the operator
installed from the chart with that integration's values and RBAC.

What makes the interleaving deterministic: the operator
talks to kube-apiserver through `fault_proxy.FaultProxy`, which holds job A's fourth Pod
create back until job B's four Pods exist (at most `slow_create` seconds), so they reach
the server between A's third and fourth. Without a gang the scheduler then binds 3 + 3
and both jobs wait for ever; with one, the gang that is whole runs first.

Bindings are seen by a watch on the namespace's Pods (`binding_watch`): timed, and with
the number of their job's Pods that existed when each was bound.
"""

from __future__ import annotations

import pathlib
import threading
import time
from collections.abc import Callable
from typing import Any

from ddpjob_devcluster.clusters.real import RealCluster
from ddpjob_devcluster.controlplane.node import NodeShape
from ddpjob_devcluster.scenarios.binding_watch import BindingWatch
from ddpjob_devcluster.scenarios.chaos import Chaos
from ddpjob_devcluster.scenarios.fault_proxy import FaultProxy, SlowCreate, point_kubeconfig_at
from ddpjob_devcluster.scenarios.gang import JOB_NODES, NODES, Result, deadlocked, interleave, job_body, result

GPU_NODES = tuple(NodeShape(f"gpu-{i}", cpu="8", memory="32Gi", gpus=1) for i in range(NODES))


def run(
    plane: Any,
    workdir: str | pathlib.Path,
    gang: str,
    *,
    values: dict[str, Any] | None = None,
    scheduling: Callable[[RealCluster], dict[str, Any]] | None = None,
    prepare: Callable[[RealCluster], None] | None = None,
    deadlock_wait: float = 10.0,
    finish_timeout: float = 600.0,
    work_seconds: float = 2.0,
    slow_create: float = 300.0,
) -> Result:
    """values: the chart's values for the integration (default: `gang.<gang>.enabled`);
    scheduling: more of `spec.scheduling` for the cluster (a Kueue queue named after its
    namespace); prepare: objects the integration needs (queues), made before the jobs."""
    if values is None:
        values = {} if gang == "none" else {"gang": {gang: {"enabled": True}}}
    cluster = RealCluster(
        pathlib.Path(workdir) / "cluster", plane=plane, nodes=GPU_NODES, stop_grace=1.0, values=values
    )
    release = threading.Event()
    proxy = FaultProxy(
        plane.server,
        plane.ca,
        Chaos(rate=0.0, watch_lifetime=None),
        slow=SlowCreate("pods", slow_create, skip=JOB_NODES - 1, release=release),
    )
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

        interleave(cluster, lambda name: cluster.create_job(body(name)), release)
        stuck = deadlocked(cluster, gang, deadlock_wait, finish_timeout)
        end = time.time()
        bindings = watch.stop()
        watch = None
        return result(cluster, gang, bindings, {b.pod: b.peers for b in bindings}, start, end, stuck)
    finally:
        if watch is not None:
            watch.stop()
        cluster.stop()
        proxy.stop()


def _with_scheduling(body: dict[str, Any], scheduling: dict[str, Any]) -> dict[str, Any]:
    body["spec"]["scheduling"].update(scheduling)
    return body
