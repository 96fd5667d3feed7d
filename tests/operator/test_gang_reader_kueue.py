"""The controller reads a gated `gang: kueue` job's Workload (and only then), shows its
queue's reason, and comes back to read it again with backoff while the gang stays gated."""

from __future__ import annotations

from typing import Any

import pytest

from ddpjob.api.gangs.kueue import INTEGRATION, workload_path
from ddpjob.operator.kube import Forbidden
from tests.operator.test_controller import FakeKube, job_body, make, pod, run

pytestmark = pytest.mark.timeout(30)

NO_QUOTA = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor f"
GATED: dict[str, Any] = dict(
    scheduled=False,
    scheduling_reason="SchedulingGated",
    scheduling_message="Scheduling is blocked due to non-empty scheduling gates",
)


class WorkloadKube(FakeKube):
    def __init__(self, workload: dict | None = None, error: Exception | None = None) -> None:
        super().__init__()
        self.workload, self.error = workload, error
        self.reads: list[str] = []

    async def get(self, url: str) -> dict:
        if "/workloads/" not in url:
            return await super().get(url)
        self.reads.append(url)
        if self.error is not None:
            raise self.error
        assert self.workload is not None, "no Workload to serve"
        return self.workload


def queued_controller(kube: WorkloadKube, gang: str = "kueue", pods=None):
    body = job_body(nodes=2, scheduling={"gang": gang, "queue": "lq"} if gang == "kueue" else {"gang": gang})
    c, _, _, index = make(body, pods if pods is not None else [pod(0, "Pending", **GATED), pod(1, "Pending", **GATED)])
    c.kube = kube
    return c, index


def statuses(kube: FakeKube) -> list[dict]:
    return [p for kind, p in kube.calls if kind == "status"]


def test_a_gated_kueue_job_shows_its_workloads_reason_and_is_read_again_later():
    kube = WorkloadKube(
        {
            "spec": {"queueName": "lq"},
            "status": {
                "conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": NO_QUOTA}]
            },
        }
    )
    c, _ = queued_controller(kube)
    wakes = run(c, times=2)
    assert kube.reads and kube.reads[0] == workload_path("ns", "j-attempt-0")
    assert statuses(kube)[-1]["message"] == f"Scheduled 0/2: Kueue queue lq: {NO_QUOTA}"
    assert all(w is not None and 0 < w <= 30 * 1.25 for w in wakes), wakes  # it comes back to read again


def test_a_running_or_non_kueue_job_never_reads_a_workload():
    kube = WorkloadKube({})
    c, _ = queued_controller(kube, pods=[pod(0), pod(1)])
    assert run(c, times=2) and kube.reads == [] and c._jobs[("ns", "j")].gang_reads == 0
    kube = WorkloadKube({})
    c, _ = queued_controller(kube, gang="kubernetes")
    run(c)
    assert kube.reads == []


def test_an_unreadable_workload_leaves_the_gates_words():
    kube = WorkloadKube(error=Forbidden(403, "Forbidden", "workloads is forbidden"))
    c, _ = queued_controller(kube)
    run(c)
    assert kube.reads and statuses(kube)[-1]["message"].startswith("Scheduled 0/2: Scheduling is blocked")


def test_the_workload_is_read_again_after_2_4_8_at_most_30_seconds():
    recheck = INTEGRATION.reads.recheck
    assert recheck.delay(1, 0.0) == 2.0 and recheck.delay(3, 0.0) == 8.0
    assert recheck.delay(10, 0.0) == 30.0
