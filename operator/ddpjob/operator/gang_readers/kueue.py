"""`gang: kueue`: why Kueue holds the gang, from its Workload.

Only while the job's Pods wait at Kueue's scheduling gate (the state in which the
Workload says more than the Pods): one GET of `kueue.x-k8s.io/v1beta2` workloads/<group>
(Kueue names a Pod group's Workload after the group, `<job>-attempt-<n>`:
render/gangs/kueue.py). What it says is pure `job.queue_wait.waiting_reason`: reason
`Queued`, and the queue's words in place of the gate's, which say only that it is closed.

The chart grants `get` on workloads only with `gang.kueue.enabled`; a 404 (the Workload
not made yet: Kueue makes it once the whole group's Pods exist) leaves the gate's words.
"""

from __future__ import annotations

from ddpjob.backoff import Backoff
from ddpjob.job.queue_wait import GATED, waiting_reason
from ddpjob.operator.gang_readers.base import Reader
from ddpjob.operator.kube import Kube

API = "/apis/kueue.x-k8s.io/v1beta2"


def workload_path(namespace: str, name: str) -> str:
    return f"{API}/namespaces/{namespace}/workloads/{name}"


async def read(kube: Kube, namespace: str, group: str) -> tuple[str | None, str] | None:
    return waiting_reason(await kube.get(workload_path(namespace, group)))


READER = Reader("kueue", held=GATED, read=read, recheck=Backoff(base=2.0, cap=30.0))
