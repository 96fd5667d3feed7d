"""Two 4-node jobs on a cluster of six 1-GPU nodes, with and without gang scheduling.

The first job's Pods reach the API server in two parts (one create is slow, as one
request of a burst often is: it is held until the second job's Pods exist), so the second
job's Pods arrive in between. The scheduler places Pods one at a time:

- gang none: job A gets 3 nodes, job B the other 3; each waits for its 4th Pod for ever
  while 6 GPUs sit idle (a deadlock). It is detected by a bounded wait: both jobs still
  `Scheduled 3/4` after `deadlock_wait` seconds, no Pod of either having run its work.
- gang kubernetes: the native PodGroup (minCount 4) holds job A's 3 Pods until all 4
  exist; job B fits whole and runs, then job A: both finish, one after the other.

Each Pod runs a tiny rendezvous (rank 0 waits for every peer to connect, then all do
`work_seconds` of "training"), so a partly placed gang blocks exactly as DDP does.

`idle GPU-seconds`: for every binding, the time from the Pod being bound to its gang being
complete (or to the end of the run if it never is), times the Pod's GPUs: a wall-clock
figure, which benchmarks/gang_deadlock.py reports. What the tests assert instead is the
order of events: `peers_at_binding`, how many Pods of its job existed when each Pod was
bound (`binding_watch`): all of them for a gang bound whole.
real_gang.py runs it on the real control plane and schedulers (tests/gangs/
test_gang_deadlock_real.py, benchmarks/gang_deadlock.py).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ddpjob.api import names
from ddpjob_devcluster.clusters.client import wait_until

NODES, JOB_NODES = 6, 4

RENDEZVOUS = r"""
import os, socket, sys, time
n, rank = int(os.environ["NNODES"]), int(os.environ["NODE_RANK"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
deadline = time.time() + float(os.environ.get("RDZV_TIMEOUT", "300"))
if rank == 0:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((addr, port)); srv.listen(n); srv.settimeout(max(deadline - time.time(), 1))
    try:
        peers = [srv.accept()[0] for _ in range(n - 1)]
    except socket.timeout:
        sys.exit(3)
    for p in peers:
        p.sendall(b"go")
else:
    while True:
        try:
            c = socket.create_connection((addr, port), timeout=1)
            break
        except OSError:
            if time.time() > deadline:
                sys.exit(3)
            time.sleep(0.1)
    c.settimeout(max(deadline - time.time(), 1))
    c.recv(2)
print(f"rank {rank}: all {n} peers here", flush=True)
time.sleep(float(os.environ.get("WORK_SECONDS", "2")))
"""


@dataclass
class Result:
    gang: str
    finished: dict[str, str]  # job -> final phase seen
    scheduled: dict[str, int]  # job -> scheduledNodes at the end
    messages: dict[str, str]
    idle_gpu_seconds: float
    wall_seconds: float
    order: list[str]  # jobs in the order their gangs were completely bound
    deadlocked: bool
    bindings: list[tuple[str, float]]  # (job, time since start) of every binding
    peers_at_binding: list[tuple[str, int]]  # (job, its Pods that existed then) of every binding


def job_body(name: str, gang: str, work_seconds: float) -> dict[str, Any]:
    return {
        "apiVersion": names.API_VERSION,
        "kind": names.KIND,
        "metadata": {"name": name},
        "spec": {
            "nodes": JOB_NODES,
            "nprocPerNode": 1,
            "gpusPerNode": 1,
            "backend": "gloo",
            "image": "ddpjob/trainer:0.1.0",
            "command": [sys.executable, "-c", RENDEZVOUS],
            "env": [{"name": "WORK_SECONDS", "value": str(work_seconds)}],
            "restartPolicy": "Never",
            "scheduling": {"gang": gang},
        },
    }


def idle_seconds(bindings: list[Any], end: float) -> tuple[float, list[str]]:
    """(idle GPU-seconds until each gang's completion or `end`, the jobs in completion order)."""
    by_job: dict[str, list[Any]] = {}
    for b in bindings:
        by_job.setdefault(b.labels.get(names.LABEL_JOB_NAME, b.pod), []).append(b)
    idle = 0.0
    complete: dict[str, float] = {}
    for job, bs in by_job.items():
        done = sorted(b.time for b in bs)[JOB_NODES - 1] if len(bs) >= JOB_NODES else None
        if done is not None:
            complete[job] = done
        for b in bs:
            gpus = float(sum((q for k, q in b.requests.items() if k.endswith("/gpu")), Decimal(0)))
            idle += max((done if done is not None else end) - b.time, 0.0) * gpus
    return idle, sorted(complete, key=complete.__getitem__)


JOBS = ("job-a", "job-b")


def interleave(cluster: Any, create: Callable[[str], object], release: threading.Event) -> None:
    """Job A's first three Pods, then job B's four, then A's fourth: its create is held
    (by the fault proxy) until `release`, set here once B's Pods exist. (The
    operator creates a gang in slow-start batches 1, 2, 4, ...: A's fourth is the held one.)"""
    create("job-a")
    wait_until(lambda: len(cluster.pods("job-a")) >= JOB_NODES - 1, 120, "job-a has 3 Pods")
    create("job-b")
    wait_until(lambda: len(cluster.pods("job-b")) == JOB_NODES, 120, "job-b has its 4 Pods")
    release.set()
    wait_until(
        lambda: len(cluster.pods("job-a")) + len(cluster.pods("job-b")) == 2 * JOB_NODES, 120, "all 8 Pods exist"
    )


def deadlocked(cluster: Any, gang: str, deadlock_wait: float, finish_timeout: float) -> bool:
    """Without a gang: whether both jobs still wait at 3/4 after `deadlock_wait` s. With
    one: both jobs end (False), or the wait fails after `finish_timeout` s."""
    messages = lambda: [cluster.status(j).get("message") for j in JOBS]  # noqa: E731
    if gang != "none":
        wait_until(
            lambda: all(cluster.status(j).get("phase") in ("Succeeded", "Failed") for j in JOBS),
            finish_timeout,
            "both jobs finish",
            messages,
        )
        return False

    def both_stuck() -> bool:
        st = [cluster.status(j) for j in JOBS]
        return all(
            s.get("scheduledNodes") == JOB_NODES - 1 and s.get("message", "").startswith("Scheduled 3/4") for s in st
        )

    wait_until(both_stuck, 180, "both jobs report Scheduled 3/4", messages)
    time.sleep(deadlock_wait)  # the bounded wait: nothing may change in it
    return both_stuck() and not any(cluster.status(j).get("phase") in ("Succeeded", "Failed") for j in JOBS)


def result(
    cluster: Any, gang: str, bindings: list[Any], peers: dict[str, int], start: float, end: float, stuck: bool
) -> Result:
    """The run's outcome; `bindings` in time order, `peers` of each bound Pod."""
    idle, order = idle_seconds(bindings, end)
    statuses = {j: cluster.status(j) for j in JOBS}
    return Result(
        gang=gang,
        finished={j: s.get("phase", "") for j, s in statuses.items()},
        scheduled={j: s.get("scheduledNodes", 0) for j, s in statuses.items()},
        messages={j: s.get("message", "") for j, s in statuses.items()},
        idle_gpu_seconds=idle,
        wall_seconds=end - start,
        order=order,
        deadlocked=stuck,
        bindings=[(b.labels.get(names.LABEL_JOB_NAME, ""), b.time - start) for b in bindings],
        peers_at_binding=[(b.labels.get(names.LABEL_JOB_NAME, ""), peers.get(b.pod, 0)) for b in bindings],
    )
