"""Every Pod delete of the operator carries a uid precondition (issue 40, low 8): a Pod the
pass did not see with a uid is read first and deleted only if this job controls it, with
the uid it read; one of another owner, or of none, is never deleted by name alone."""

from __future__ import annotations

import asyncio
from typing import Any

from ddpjob.job.observe import PodState
from ddpjob.operator.children import Children
from ddpjob.operator.gang import GangSupport
from ddpjob.operator.kube import NotFound
from ddpjob.operator.metrics import OperatorMetrics
from ddpjob.operator.observer import JobMemory

JOB_UID = "job-uid"


def pod(name: str, uid: str, owner: str | None) -> dict[str, Any]:
    refs = [{"apiVersion": "ddpjob.io/v1alpha1", "kind": "DDPJob", "name": "j", "uid": owner, "controller": True}]
    return {"metadata": {"name": name, "uid": uid, "ownerReferences": refs if owner else []}}


class Kube:
    def __init__(self, pods: dict[str, dict[str, Any]]) -> None:
        self.pods, self.deletes = pods, []  # type: ignore[var-annotated]

    async def get(self, url: str) -> dict[str, Any]:
        name = url.rsplit("/", 1)[-1]
        if name not in self.pods:
            raise NotFound(404, "NotFound", f"pods {name!r} not found")
        return self.pods[name]

    async def delete(self, url: str, *, uid: str | None = None, **_: Any) -> bool:
        self.deletes.append((url.rsplit("/", 1)[-1], uid))
        return True


def test_each_pod_delete_carries_the_uid_of_a_pod_this_job_controls() -> None:
    kube = Kube(
        {
            "j-1": pod("j-1", "uid-1", JOB_UID),
            "j-2": pod("j-2", "uid-2", "another-job"),
            "j-3": pod("j-3", "uid-3", None),
        }
    )
    children = Children(kube, GangSupport(), OperatorMetrics(), lambda *_: None)  # type: ignore[arg-type]
    job = JobMemory(("ns", "j"), uid=JOB_UID)
    seen = [PodState("j-0", 0, 0, "Running", uid="uid-0"), PodState("j-1", 1, 0, "Pending")]  # j-1: no uid yet
    asyncio.run(children.delete_pods(job, "ns", ["j-0", "j-1", "j-2", "j-3", "j-4"], seen))
    assert kube.deletes == [("j-0", "uid-0"), ("j-1", "uid-1")]
    assert all(uid for _, uid in kube.deletes)
