"""Members on a lost or unhealthy node (job/node_loss.py), pure: a rigid gang restarts on
the healthy nodes as a disruption the moment the observation says a member's Node is gone
or not Ready, and the lost Pod is force-deleted at once; an elastic job goes on without
it; an unhealthy node's members are moved off gracefully and the next Pods avoid it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ddpjob.api.spec import parse_job
from ddpjob.job import lifecycle, node_loss
from ddpjob.job.decision import Observed
from ddpjob.job.observe import PodState

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NODES = {"n0": "True", "n1": "True", "n2": "True"}


def job(nodes=2, elastic=None, **spec):
    spec.update(image="img", nodes=nodes, restartBackoffSeconds=0, maxRestarts=1)
    if elastic:
        spec["elastic"] = {"minNodes": elastic[0], "maxNodes": elastic[1]}
    return parse_job(
        {
            "apiVersion": "ddpjob.io/v1alpha1",
            "kind": "DDPJob",
            "metadata": {"name": "demo", "namespace": "ns", "generation": 1},
            "spec": spec,
        }
    )


def pod(rank: int, phase: str = "Running", restarts: int = 0, **kw) -> PodState:
    kw.setdefault("node_name", f"n{rank}")
    return PodState(name=f"demo-{rank}", node_rank=rank, restart_count=restarts, phase=phase, uid=f"u{rank}", **kw)


def decide(j, pods, previous, nodes=NODES, unhealthy=None, now=T0) -> lifecycle.Plan:
    return lifecycle.decide(
        Observed(job=j, pods=tuple(pods), previous=previous, now=now, nodes=nodes, unhealthy_nodes=unhealthy or {})
    )


def running(j, ranks):
    plan = decide(j, [pod(r) for r in ranks], {})
    plan = decide(j, [pod(r) for r in ranks], plan.status)
    assert plan.status["phase"] == "Running", plan.status
    return plan.status


def test_a_rigid_gang_restarts_as_soon_as_a_members_node_is_not_ready_and_is_not_charged():
    j = job()
    st = running(j, [0, 1])
    for ready, why in (
        ("Unknown", "is not Ready (Ready=Unknown)"),
        ("False", "is not Ready (Ready=False)"),
        (None, "is gone"),
    ):
        p = decide(j, [pod(0), pod(1)], st, nodes={**NODES, "n1": ready})
        assert p.status["phase"] == "Restarting", (ready, p.status)
        # A disruption: maxRestarts=1 is not used up, and a later failure may still restart.
        assert (p.status["restarts"], p.status["disruptions"]) == (1, 1)
        failure = p.status["lastFailure"]
        assert (failure["pod"], failure["reason"], failure["retryable"]) == ("demo-1", "NodeLost", True)
        assert failure["message"] == f"Pod demo-1 lost: its node n1 {why}"
        assert set(p.delete) == {"demo-0", "demo-1"}
        assert [e.reason for e in p.events] == ["Restarting"] and "NodeLost: not counted" in p.events[0].message


def test_the_lost_pod_is_force_deleted_at_once_and_the_next_attempt_waits_only_for_the_live_node():
    j = job()
    st = decide(j, [pod(0), pod(1)], running(j, [0, 1]), nodes={**NODES, "n1": "Unknown"}).status
    going = [
        pod(0, deleting=True, deletion_time="2026-01-01T00:00:30Z"),
        pod(1, deleting=True, deletion_time="2026-01-01T00:00:30Z"),
    ]
    p = decide(j, going, st, nodes={**NODES, "n1": "Unknown"}, now=T0 + timedelta(seconds=1))
    assert [(f.pod, f.uid) for f in p.force_delete] == [("demo-1", "u1")]
    assert "node n1 is not Ready" in p.force_delete[0].message and p.create == ()
    # Once the live node's kubelet confirms, the new attempt starts.
    p = decide(j, [], p.status, nodes={**NODES, "n1": "Unknown"}, now=T0 + timedelta(seconds=2))
    assert p.create == (0, 1) and p.restart_count == 1


def test_a_member_on_a_ready_node_or_one_not_seen_yet_is_not_lost():
    j = job()
    st = running(j, [0, 1])
    for nodes in (NODES, {}, {"n0": "True"}, {**NODES, "n1": ""}):
        p = decide(j, [pod(0), pod(1)], st, nodes=nodes)
        assert p.status["phase"] == "Running" and p.status["readyNodes"] == 2 and p.delete == (), nodes


def test_an_elastic_job_goes_on_without_the_member_of_a_lost_node_and_tells_the_survivors():
    j = job(nodes=3, elastic=(1, 3))
    st = running(j, [0, 1, 2])
    lost = {**NODES, "n2": "Unknown"}
    p = decide(j, [pod(0), pod(1), pod(2)], st, nodes=lost)
    assert p.status["phase"] == "Running" and p.status["restarts"] == 0 and "disruptions" not in p.status
    assert p.status["nodes"] == "2/3" and p.status["resizes"] == 1
    assert p.delete == ("demo-2",) and p.tell_lost == ("demo-2",)
    assert [(e.type, e.reason) for e in p.events] == [("Warning", "NodeLost")]
    assert "training at 2/3 nodes: lost demo-2: Pod demo-2 lost: its node n2 is not Ready" in p.events[0].message
    # Being deleted on that node: force-deleted at once, the survivors untouched.
    going = [pod(0), pod(1), pod(2, deleting=True, deletion_time="2026-01-01T00:00:30Z")]
    p = decide(j, going, p.status, nodes=lost, now=T0 + timedelta(seconds=1))
    assert [f.pod for f in p.force_delete] == ["demo-2"] and p.delete == () and p.events == ()
    # Gone: created again (on whatever node the scheduler finds), and the job grows back.
    p = decide(j, [pod(0), pod(1)], p.status, nodes=lost, now=T0 + timedelta(seconds=2))
    assert p.create == (2,) and p.status["restarts"] == 0
    p = decide(j, [pod(0), pod(1), pod(2, node_name="n3")], p.status, nodes=lost, now=T0 + timedelta(seconds=3))
    assert p.status["nodes"] == "3/3" and [e.reason for e in p.events] == ["Resized"]


def test_an_elastic_job_below_min_nodes_after_a_node_loss_restarts_its_gang_uncharged():
    j = job(nodes=2, elastic=(2, 2))
    st = running(j, [0, 1])
    p = decide(j, [pod(0), pod(1)], st, nodes={**NODES, "n0": None})
    assert p.status["phase"] == "Restarting" and p.status["disruptions"] == 1
    assert p.status["lastFailure"]["reason"] == "NodeLost"


def test_members_of_an_unhealthy_node_are_moved_off_gracefully_and_the_next_pods_avoid_it():
    j = job()
    st = running(j, [0, 1])
    bad = {"n1": "condition GPUUnhealthy=True (Xid 79)"}
    p = decide(j, [pod(0), pod(1)], st, unhealthy=bad)
    assert p.status["phase"] == "Restarting" and p.status["disruptions"] == 1
    assert p.status["lastFailure"]["reason"] == "NodeUnhealthy"
    assert p.status["lastFailure"]["message"] == "Pod demo-1 moved off node n1: condition GPUUnhealthy=True (Xid 79)"
    assert set(p.delete) == {"demo-0", "demo-1"}
    # Its kubelet is alive: the Pods are deleted gracefully (SIGTERM, a checkpoint), never forced.
    going = [
        pod(0, deleting=True, deletion_time="2026-01-01T00:00:30Z"),
        pod(1, deleting=True, deletion_time="2026-01-01T00:00:30Z"),
    ]
    assert decide(j, going, p.status, unhealthy=bad, now=T0 + timedelta(seconds=1)).force_delete == ()
    created = decide(j, [], p.status, unhealthy=bad, now=T0 + timedelta(seconds=2))
    assert created.create == (0, 1) and created.avoid_nodes == ("n1",)
    # An elastic job shrinks instead, and its replacement avoids the node too.
    e = job(nodes=2, elastic=(1, 2))
    p = decide(e, [pod(0), pod(1)], running(e, [0, 1]), unhealthy=bad)
    assert (p.status["phase"], p.status["nodes"], p.delete) == ("Running", "1/2", ("demo-1",))
    p = decide(e, [pod(0)], p.status, unhealthy=bad, now=T0 + timedelta(seconds=1))
    assert p.create == (1,) and p.avoid_nodes == ("n1",)


def test_avoided_nodes_are_bounded():
    many = {f"bad-{i:03d}": "taint x:NoSchedule" for i in range(200)}
    observed = Observed(job=None, pods=(), previous={}, now=T0, unhealthy_nodes=many)
    assert len(node_loss.avoid(observed)) == node_loss.MAX_AVOIDED


def test_a_rank_that_lost_its_peers_node_is_retried_under_exit_code():
    """A killed node's peer is the first to fail, with the collective's broken connection
    (exit 1), long before the node is NotReady: under restartPolicy ExitCode that is no
    verdict of the program's on its input, and the gang restarts (counted: nothing says yet
    that a node was lost); the program's own exit 1 still ends the job."""
    j = job(restartPolicy="ExitCode")
    st = running(j, [0, 1])
    gloo = (
        "[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Read error "
        "[10.244.2.3]:57312: Connection reset by peer"
    )
    p = decide(j, [pod(0, "Failed", exit_code=1, message=gloo), pod(1)], st)
    assert p.status["phase"] == "Restarting" and p.status["lastFailure"]["retryable"] is True
    own = "[rank0]: ValueError: bad shape"
    p = decide(j, [pod(0, "Failed", exit_code=1, message=own), pod(1)], st)
    assert p.status["phase"] == "Failed" and p.status["lastFailure"]["retryable"] is False
