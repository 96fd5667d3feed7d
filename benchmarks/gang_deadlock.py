"""Two 4-node jobs on six 1-GPU nodes, job A's fourth Pod create held back so job B's
Pods arrive in between: GPU-seconds held idle, and whether both jobs finish, for each
gang integration on the real schedulers (the scenario: ddpjob_devcluster/scenarios/
gang.py, run by real_gang.py).

Real rows: kube-scheduler v1.37.2 for `none` and `kubernetes` (the native PodGroup),
scheduler-plugins' coscheduling scheduler for `coscheduling`, Volcano v1.10.0's
scheduler and controllers for `volcano`, Kueue v0.17.0's manager (a ClusterQueue of all
six GPUs) for `kueue`; the operator installed from
the chart with that integration's values, talking to kube-apiserver through a proxy that
holds the one create back.

Idle GPU-seconds: for each bound Pod, the time from its binding to its gang being
complete (all 4 bound), or to the end of the observation when the gang never is. Without
gang scheduling the observation ends after a bounded wait (DEADLOCK_WAIT seconds after
both jobs report `Scheduled 3/4`): in a real cluster the deadlock, and the idle GPUs,
last until someone deletes a job, so that number grows with the wait.
Goal: 0 idle-held GPU-seconds beyond placement (the spread of one gang's bindings) for
every integration.
"""

from __future__ import annotations

import contextlib
import importlib
import pathlib
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

from ddpjob_devcluster.scenarios import gang as gang_scenario, real_gang as real_gang_scenario

DEADLOCK_WAIT = 30.0


def _started(name: str) -> Callable[[Any], None]:
    """Start `controlplane/<name>.py`'s components beside the plane (CRDs and RBAC as admin)."""

    def start(plane: Any) -> None:
        from ddpjob_devcluster.controlplane import install

        importlib.import_module(f"ddpjob_devcluster.controlplane.{name}").start(plane, install.admin_apply(plane))

    return start


def _kueue_queue(cluster: Any) -> None:
    """A ClusterQueue holding all six GPUs and its LocalQueue, named after the namespace."""
    import kubernetes

    from ddpjob_devcluster.controlplane import kueue

    custom = kubernetes.client.CustomObjectsApi(cluster.api)
    quota = {"cpu": "48", "memory": "192Gi", "nvidia.com/gpu": "6"}
    for obj in kueue.queue_objects(cluster.namespace, cluster.namespace, quota):
        plural = obj["kind"].lower() + "s"
        if obj["kind"] == "LocalQueue":
            custom.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", cluster.namespace, plural, obj)
        else:
            custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", plural, obj)


# gang -> what to start beside the plane first (None: nothing); the scenario's keywords.
REAL: dict[str, tuple[Callable[[Any], None] | None, dict[str, Any]]] = {
    "none": (None, {}),
    "kubernetes": (None, {}),
    "coscheduling": (_started("coscheduling"), {}),
    "volcano": (_started("volcano"), {}),
    "kueue": (_started("kueue"), {"prepare": _kueue_queue, "scheduling": lambda cluster: {"queue": cluster.namespace}}),
}


def report(where: str, r: gang_scenario.Result) -> None:
    print(
        f"{where:<9} gang={r.gang:<12} deadlocked={r.deadlocked!s:<5} phases={r.finished} "
        f"scheduled={r.scheduled} completion order={r.order} idle GPU-seconds={r.idle_gpu_seconds:.2f} "
        f"wall={r.wall_seconds:.1f} s"
    )
    for job, message in r.messages.items():
        print(f"    {job}: {message[:200]}")


@contextlib.contextmanager
def control_plane(tmp: pathlib.Path) -> Iterator[Any]:
    from ddpjob_devcluster.controlplane.controlplane import ControlPlane

    with ControlPlane(tmp / "plane") as plane:
        yield plane


def main() -> None:
    rows: dict[tuple[str, str], gang_scenario.Result] = {}
    if shutil.which("go") is None:
        sys.exit("the real schedulers are built with Go, and no `go` is on PATH")
    else:
        with tempfile.TemporaryDirectory(prefix="ddpjob-gang-real-") as tmp, control_plane(pathlib.Path(tmp)) as plane:
            for gang, (start, kwargs) in REAL.items():
                if start is not None:
                    start(plane)
                r = real_gang_scenario.run(plane, pathlib.Path(tmp) / gang, gang, deadlock_wait=DEADLOCK_WAIT, **kwargs)
                rows["real", gang] = r
                report("real", r)
    print("\nsummary: idle GPU-seconds (deadlocked?)")
    for (where, gang), r in rows.items():
        print(
            f"  {where:<9} {gang:<12} {r.idle_gpu_seconds:8.2f}  {'deadlock' if r.deadlocked else 'both finished'}"
            f"  wall {r.wall_seconds:.1f} s"
        )


if __name__ == "__main__":
    main()
