"""The elastic policy, pure: a running elastic job keeps its survivors through a lost Pod,
re-creates the lost index under the same name and grows back, resizes with spec.nodes,
and leaves to the rigid rules what it cannot carry (fewer than minNodes, a permanent
failure). Every resize is counted and said once, with its cause."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ddpjob.api.spec import parse_job
from ddpjob.job import lifecycle
from ddpjob.job.decision import Observed
from ddpjob.job.observe import PodState

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def job(nodes=4, lo=2, hi=4, **spec):
    spec.setdefault("restartBackoffSeconds", 0)
    spec.update(image="img", nodes=nodes)
    if lo is not None:
        spec["elastic"] = {"minNodes": lo, "maxNodes": hi}
    return parse_job(
        {
            "apiVersion": "ddpjob.io/v1alpha1",
            "kind": "DDPJob",
            "metadata": {"name": "demo", "namespace": "ns", "generation": 1},
            "spec": spec,
        }
    )


def pod(rank: int, phase: str = "Running", restarts: int = 0, **kw) -> PodState:
    return PodState(name=f"demo-{rank}", node_rank=rank, restart_count=restarts, phase=phase, **kw)


def decide(j, pods, previous, now=T0) -> lifecycle.Plan:
    return lifecycle.decide(Observed(job=j, pods=tuple(pods), previous=previous, now=now))


def running_status(j, ranks=range(4)):
    """The status of a job that has run with `ranks` for a while."""
    plan = decide(j, [pod(r) for r in ranks], {})
    plan = decide(j, [pod(r) for r in ranks], plan.status)
    assert plan.status["phase"] == "Running" and plan.events == ()
    return plan.status


def test_an_elastic_job_runs_once_min_nodes_run_and_creates_the_rest():
    j = job()
    assert decide(j, [], {}).create == (0, 1, 2, 3)
    p = decide(j, [pod(0), pod(1), pod(2, "Pending"), pod(3, "Pending")], {})
    assert p.status["phase"] == "Running" and p.status["nodes"] == "2/4" and p.status["desiredNodes"] == 4
    one = decide(j, [pod(0), pod(1, "Pending"), pod(2, "Pending"), pod(3, "Pending")], {})
    assert one.status["phase"] == "Pending"


def test_a_lost_pod_keeps_the_survivors_and_comes_back_without_a_restart():
    j = job()
    st = running_status(j)
    # demo-2 is killed (its node reclaimed): the survivors are kept, demo-2 is deleted.
    p = decide(j, [pod(0), pod(1), pod(2, "Failed", exit_code=137, reason="Error"), pod(3)], st)
    assert p.status["phase"] == "Running" and p.delete == ("demo-2",) and p.create == ()
    assert p.status["restarts"] == 0 and "disruptions" not in p.status
    assert p.status["nodes"] == "3/4" and p.status["resizes"] == 1
    assert p.status["lastFailure"]["pod"] == "demo-2"
    assert [(e.type, e.reason) for e in p.events] == [("Warning", "NodeLost")]
    assert "training at 3/4 nodes: lost demo-2" in p.events[0].message
    # While it goes away: nothing new to say, nothing to delete again.
    p = decide(j, [pod(0), pod(1), pod(2, "Failed", exit_code=137, deleting=True), pod(3)], p.status)
    assert p.events == () and p.delete == () and p.create == () and p.status["phase"] == "Running"
    # Gone: the same index is created again, in the same attempt.
    p = decide(j, [pod(0), pod(1), pod(3)], p.status)
    assert p.create == (2,) and p.restart_count == 0 and p.delete == () and p.events == ()
    st = p.status
    p = decide(j, [pod(0), pod(1), pod(2, "Pending"), pod(3)], st)
    assert p.status["phase"] == "Running" and p.events == () and p.create == ()
    # Back in the group: grown to 4 again, said once.
    p = decide(j, [pod(r) for r in range(4)], p.status)
    assert [(e.type, e.reason) for e in p.events] == [("Normal", "Resized")]
    assert p.events[0].message == "training at 4/4 nodes: Pod(s) joined"
    assert p.status["nodes"] == "4/4" and p.status["resizes"] == 2 and p.status["restarts"] == 0
    assert decide(j, [pod(r) for r in range(4)], p.status).events == ()


def test_pod_zero_is_replaced_like_any_other():
    j = job()
    p = decide(j, [pod(1), pod(2), pod(3)], running_status(j))
    assert p.create == (0,) and p.status["phase"] == "Running" and p.status["restarts"] == 0


def test_a_pod_deleted_by_someone_is_a_loss_not_a_gang_failure():
    j = job()
    p = decide(j, [pod(0), pod(1, deleting=True), pod(2), pod(3)], running_status(j))
    assert p.status["phase"] == "Running" and p.delete == () and p.status["nodes"] == "3/4"
    assert p.events[0].reason == "NodeLost" and "demo-1" in p.events[0].message


def test_an_eviction_is_a_loss_too():
    j = job()
    evicted = pod(3, "Failed", disruption="EvictionByEvictionAPI", message="Eviction API: evicting")
    p = decide(j, [pod(0), pod(1), pod(2), evicted], running_status(j))
    assert p.status["phase"] == "Running" and p.delete == ("demo-3",) and "disruptions" not in p.status


def test_below_min_nodes_the_gang_restarts_as_a_rigid_one_does():
    j = job(lo=3)
    p = decide(j, [pod(0), pod(1), pod(2, "Failed", exit_code=137), pod(3, "Failed", exit_code=137)], running_status(j))
    assert p.status["phase"] == "Restarting" and p.status["restarts"] == 1
    assert set(p.delete) == {"demo-0", "demo-1", "demo-2", "demo-3"}


def test_a_failure_the_restart_policy_does_not_retry_fails_the_job():
    j = job(restartPolicy="ExitCode")
    p = decide(j, [pod(0), pod(1), pod(2, "Failed", exit_code=1), pod(3)], running_status(j))
    assert p.status["phase"] == "Failed"


def test_a_rigid_job_still_restarts_its_gang():
    j = job(lo=None)
    p = decide(j, [pod(0), pod(1), pod(2, "Failed", exit_code=137), pod(3)], running_status(j))
    assert p.status["phase"] == "Restarting" and p.status["restarts"] == 1


def test_spec_nodes_lowered_stops_the_pods_above_it():
    st = running_status(job())
    p = decide(job(nodes=3), [pod(r) for r in range(4)], st)
    assert p.delete == ("demo-3",) and p.status["phase"] == "Running" and p.status["desiredNodes"] == 3
    # A resize the user asked for: Normal, not a lost node.
    assert [(e.type, e.reason, e.message) for e in p.events] == [
        ("Normal", "Resized", "training at 3/3 nodes: spec.nodes changed from 4 to 3")
    ]
    assert p.status["resizes"] == 1
    p = decide(job(nodes=3), [pod(0), pod(1), pod(2), pod(3, deleting=True)], p.status)
    assert p.delete == () and p.events == () and p.status["nodes"] == "3/3"


def test_a_node_lost_while_spec_nodes_is_lowered_is_still_a_loss():
    st = running_status(job())
    p = decide(job(nodes=3), [pod(0), pod(1, "Failed", exit_code=137), pod(2), pod(3)], st)
    assert [(e.type, e.reason) for e in p.events] == [("Warning", "NodeLost")]
    assert p.events[0].message.startswith("training at 2/3 nodes: lost demo-1")


def test_spec_nodes_raised_creates_the_new_index():
    st = running_status(job(nodes=3), range(3))
    p = decide(job(nodes=4), [pod(r) for r in range(3)], st)
    assert p.create == (3,) and p.status["phase"] == "Running" and not p.write_status
    # The operator writes (and says) the next step's status, which sees the new Pod.
    p = decide(job(nodes=4), [pod(r) for r in range(3)] + [pod(3, "Pending")], st)
    assert p.status["nodes"] == "3/4" and p.events[0].message.endswith("spec.nodes changed from 3 to 4")
    assert decide(job(nodes=4), [pod(r) for r in range(3)] + [pod(3, "Pending")], p.status).events == ()


def test_a_finishing_job_is_left_to_the_success_policy():
    j = job()
    done = [pod(r, "Succeeded", exit_code=0) for r in range(4)]
    assert decide(j, done, running_status(j)).status["phase"] == "Succeeded"


def test_a_lost_index_comes_back_after_the_restart_backoff():
    j = job(restartBackoffSeconds=30)
    p = decide(j, [pod(0), pod(1), pod(2, "Failed", exit_code=137), pod(3)], running_status(j))
    # Still terminating 5 s later: the loss keeps its time.
    p = decide(
        j,
        [pod(0), pod(1), pod(2, "Failed", exit_code=137, deleting=True), pod(3)],
        p.status,
        now=T0 + timedelta(seconds=5),
    )
    assert p.status["lastFailure"]["time"] == "2026-01-01T00:00:00Z"
    p = decide(j, [pod(0), pod(1), pod(3)], p.status, now=T0 + timedelta(seconds=10))
    assert p.create == () and p.requeue_after == 20.0 and "replacing demo-2 in 20s" in p.status["message"]
    assert p.status["phase"] == "Running" and p.write_status
    p = decide(j, [pod(0), pod(1), pod(3)], p.status, now=T0 + timedelta(seconds=30))
    assert p.create == (2,)


def test_a_pod_whose_delete_is_seen_after_its_replacement_is_named_as_lost():
    # The operator's step that created the replacement wrote no status (the next one does):
    # this one sees the new Pod Pending and readyNodes lower than the last written status.
    j = job()
    p = decide(j, [pod(0), pod(1), pod(2, "Pending"), pod(3)], running_status(j))
    assert p.events[0].message == "training at 3/4 nodes: lost demo-2: Pod deleted, created again"


def test_the_survivors_are_told_whom_a_running_elastic_job_lost():
    j = job()
    st = running_status(j)
    assert decide(j, [pod(r) for r in range(4)], st).tell_lost == ()
    # Failed, being deleted, or on a node that stopped reporting (Ready False while Running).
    p = decide(j, [pod(0), pod(1, "Failed", exit_code=137), pod(2, deleting=True), pod(3, ready=False)], st)
    assert p.tell_lost == ("demo-1", "demo-2", "demo-3")
    # A rigid job restarts its gang: nobody to tell.
    r = job(lo=None)
    rst = running_status(r)
    assert decide(r, [pod(0), pod(1, "Failed", exit_code=137), pod(2), pod(3)], rst).tell_lost == ()
    # Not yet running: nobody is training to be told.
    assert (
        decide(
            j, [pod(0, "Pending"), pod(1, "Failed", exit_code=137), pod(2, "Pending"), pod(3, "Pending")], {}
        ).tell_lost
        == ()
    )
