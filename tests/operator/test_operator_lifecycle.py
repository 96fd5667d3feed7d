"""The real operator (kopf, over HTTP) against the real kube-apiserver: a DDPJob's whole life."""

from __future__ import annotations

import kubernetes
import pytest

from ddpjob import render
from ddpjob.api import spec
from ddpjob_devcluster.clusters.operator_runner import wait_for
from tests.operator.conftest import Cluster, ddpjob
from tests.support.deadlines import REACTION, TEST

pytestmark = pytest.mark.timeout(TEST)


def env_of(pod: dict) -> dict[str, str]:
    trainer = next(c for c in pod["spec"]["containers"] if c["name"] == "trainer")
    return {e["name"]: e.get("value") for e in trainer.get("env") or []}


def test_service_and_pods_with_the_env_contract(cluster: Cluster, operator) -> None:
    created = cluster.create(
        ddpjob("mnist", nodes=3, nprocPerNode=2, port=29555, env=[{"name": "EPOCHS", "value": "2"}])
    )
    pods = cluster.wait_pods("mnist", 3)

    svc = cluster.service("mnist")
    assert svc is not None
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["selector"] == {"ddpjob.io/job-name": "mnist"}
    owner = {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "name": "mnist",
        "uid": created["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert svc["metadata"]["ownerReferences"] == [owner]

    for rank, pod in enumerate(pods):
        assert pod["metadata"]["name"] == f"mnist-{rank}"
        assert pod["metadata"]["ownerReferences"] == [owner]
        assert pod["metadata"]["labels"]["ddpjob.io/node-rank"] == str(rank)
        assert pod["metadata"]["labels"]["ddpjob.io/restart-count"] == "0"
        assert pod["spec"]["hostname"] == f"mnist-{rank}" and pod["spec"]["subdomain"] == "mnist"
        assert pod["spec"]["restartPolicy"] == "Never"
        env = env_of(pod)
        assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == f"mnist-0.mnist.{cluster.ns}.svc"
        assert env["MASTER_PORT"] == env["PET_MASTER_PORT"] == "29555"
        assert env["NNODES"] == env["PET_NNODES"] == "3"
        assert env["NODE_RANK"] == env["PET_NODE_RANK"] == str(rank)
        assert env["NPROC_PER_NODE"] == env["PET_NPROC_PER_NODE"] == "2"
        assert env["WORLD_SIZE"] == "6"
        assert "RANK" not in env and "LOCAL_RANK" not in env  # two processes per Pod
        assert env["DDPJOB_NAME"] == "mnist" and env["DDPJOB_NAMESPACE"] == cluster.ns
        assert env["DDPJOB_RESTART_COUNT"] == "0" and env["DDPJOB_BACKEND"] == "gloo"
        assert env["EPOCHS"] == "2"
        # Exactly what the shared renderer makes: the operator adds nothing of its own (what
        # it sent; the API server then adds its defaults, and the scheduler the node).
        expected = render.render_pod(spec.parse_job(cluster.stored("mnist")), rank, 0)
        sent = [b for r, b in cluster.created if r.resource == "pods" and b["metadata"]["name"] == f"mnist-{rank}"]
        assert [b["spec"] for b in sent] == [expected["spec"]]
    created = cluster.wait_event("mnist", "Created")
    assert created["type"] == "Normal"
    # `kubectl describe`'s From column names the operator, not the framework under it.
    assert created["source"]["component"] == created["reportingComponent"] == "ddpjob-operator"


def test_pod_phases_drive_the_job_to_succeeded(cluster: Cluster, operator) -> None:
    cluster.create(ddpjob("ok", nodes=2))
    cluster.wait_pods("ok", 2)
    st = cluster.wait_phase("ok", "Pending")
    assert st["observedGeneration"] == 1 and st["restarts"] == 0 and st["readyNodes"] == 0
    cluster.set_phase("ok", "Running", ranks=[0])
    cluster.wait_phase("ok", "Pending", readyNodes=1)
    cluster.set_phase("ok", "Running", ranks=[1])
    st = cluster.wait_phase("ok", "Running", readyNodes=2)
    assert st["startTime"]
    assert any(c["type"] == "Running" and c["status"] == "True" for c in st["conditions"])
    cluster.set_phase("ok", "Succeeded", ranks=[0])
    cluster.wait_phase("ok", "Running")  # one node done is not the job done
    cluster.set_phase("ok", "Succeeded", ranks=[1])
    st = cluster.wait_phase("ok", "Succeeded")
    assert st["completionTime"]
    assert {c["type"]: c["status"] for c in st["conditions"]} == {"Running": "False", "Succeeded": "True"}
    cluster.wait_event("ok", "Running")
    cluster.wait_event("ok", "Succeeded")
    # Finished Pods stay for their logs.
    assert len(cluster.pods("ok")) == 2


def test_failed_pod_under_onfailure_restarts_the_gang(cluster: Cluster, operator) -> None:
    cluster.start_running(ddpjob("gang", nodes=3, restartPolicy="OnFailure", maxRestarts=2))
    cluster.set_phase("gang", "Failed", ranks=[1], exit_code=1)

    pods = cluster.wait_pods("gang", 3, restart_count=1)
    assert all(env_of(p)["DDPJOB_RESTART_COUNT"] == "1" for p in pods)
    st = cluster.status("gang")
    assert st["restarts"] == 1
    assert st["lastFailure"]["pod"] == "gang-1" and st["lastFailure"]["exitCode"] == 1
    event = cluster.wait_event("gang", "Restarting")
    assert event["type"] == "Warning" and "gang-1" in event["message"] and "exit code 1" in event["message"]

    cluster.set_phase("gang", "Running")
    cluster.wait_phase("gang", "Running", restarts=1)
    cluster.set_phase("gang", "Succeeded")
    cluster.wait_phase("gang", "Succeeded", restarts=1)


def test_exitcode_policy_fails_on_exit_1(cluster: Cluster, operator) -> None:
    cluster.start_running(ddpjob("bad", nodes=2, restartPolicy="ExitCode"))
    cluster.set_phase("bad", "Failed", ranks=[0], exit_code=1)
    st = cluster.wait_phase("bad", "Failed")
    assert st["restarts"] == 0 and st["lastFailure"]["exitCode"] == 1
    assert any(c["type"] == "Failed" and c["reason"] == "PodFailed" for c in st["conditions"])
    # The peer still running is stopped; the failed one stays for its logs.
    wait_for(
        lambda: [p["metadata"]["name"] for p in cluster.pods("bad")] == ["bad-0"],
        message="the surviving Pod was not stopped",
    )
    assert cluster.wait_event("bad", "Failed")["type"] == "Warning"


def test_exitcode_policy_retries_a_signal(cluster: Cluster, operator) -> None:
    cluster.start_running(ddpjob("oom", nodes=2, restartPolicy="ExitCode"))
    cluster.set_phase("oom", "Failed", ranks=[1], exit_code=137, reason="OOMKilled")
    cluster.wait_pods("oom", 2, restart_count=1)
    assert cluster.status("oom")["restarts"] == 1


def test_max_restarts_is_honoured(cluster: Cluster, operator) -> None:
    cluster.start_running(ddpjob("flaky", nodes=2, restartPolicy="OnFailure", maxRestarts=1))
    cluster.set_phase("flaky", "Failed", ranks=[0], exit_code=2)
    cluster.run_gang("flaky", 2, attempt=1)
    cluster.set_phase("flaky", "Failed", ranks=[1], exit_code=2)
    st = cluster.wait_phase("flaky", "Failed", restarts=1)
    assert "maxRestarts=1" in st["message"]
    assert any(c["type"] == "Failed" and c["reason"] == "BackoffLimitExceeded" for c in st["conditions"])
    # No third attempt.
    assert {p["metadata"]["labels"]["ddpjob.io/restart-count"] for p in cluster.pods("flaky")} <= {"1"}


def test_suspend_and_resume(cluster: Cluster, operator) -> None:
    cluster.start_running(ddpjob("sus", nodes=2))

    cluster.patch_spec("sus", suspend=True)
    st = cluster.wait_phase("sus", "Suspended", observedGeneration=2)
    assert "startTime" not in st and st["readyNodes"] == 0
    wait_for(lambda: cluster.pods("sus") == [], message="suspend did not delete the Pods")
    cluster.wait_event("sus", "Suspended")

    cluster.patch_spec("sus", suspend=False)
    pods = cluster.wait_pods("sus", 2, restart_count=0)
    cluster.wait_phase("sus", "Pending", observedGeneration=3)
    assert len(pods) == 2
    cluster.set_phase("sus", "Running")
    cluster.wait_phase("sus", "Running", restarts=0)


def test_active_deadline_fails_the_job_and_stops_its_pods(cluster: Cluster, operator) -> None:
    cluster.create(ddpjob("slow", nodes=2, activeDeadlineSeconds=1))
    cluster.wait_pods("slow", 2)
    cluster.set_phase("slow", "Running")
    st = cluster.wait_phase("slow", "Failed", timeout=REACTION)
    assert any(c["type"] == "Failed" and c["reason"] == "DeadlineExceeded" for c in st["conditions"])
    wait_for(lambda: cluster.pods("slow") == [], message="the deadline did not stop the Pods")


def test_ttl_deletes_the_finished_job(cluster: Cluster, operator) -> None:
    cluster.create(ddpjob("ttl", nodes=1, ttlSecondsAfterFinished=1))
    cluster.run_to_success("ttl", 1)
    wait_for(lambda: cluster.job("ttl") is None, timeout=REACTION, message="the TTL did not delete the job")
    # Its children go with it (owner references: the garbage collector deletes them
    # after the job, in the background).
    wait_for(
        lambda: cluster.pods("ttl") == [] and cluster.service("ttl") is None,
        timeout=REACTION,
        message="the job's children were left behind",
    )


def test_deleting_the_job_removes_its_children(cluster: Cluster, operator) -> None:
    cluster.create(ddpjob("gone", nodes=3))
    cluster.wait_pods("gone", 3)
    cluster.delete("gone")
    wait_for(
        lambda: cluster.pods("gone") == [] and cluster.service("gone") is None, message="children were left behind"
    )
    # A later job runs through the same operator: by then the deleted job's Pod events
    # were handled, and nothing of it was recreated.
    cluster.create(ddpjob("after", nodes=1))
    cluster.run_to_success("after", 1)
    assert cluster.pods("gone") == [] and cluster.service("gone") is None
    # No finalizer: deletion never depends on the operator.
    assert "finalizers" not in (cluster.job("after") or {}).get("metadata", {})


def test_invalid_job_creates_nothing(cluster: Cluster, operator) -> None:
    body = ddpjob("broken", nodes=2, backend="nccl", env=[{"name": "MASTER_ADDR", "value": "x"}])
    # The API server checks the CRD's schema and CEL rules: kubectl apply gets a 422.
    with pytest.raises(kubernetes.client.ApiException) as refused:
        cluster.create(body)
    assert refused.value.status == 422 and "spec.backend" in str(refused.value.body)
    # An object stored without those checks (a CRD installed without its rules, an
    # older CRD version) still never runs: the operator checks the same rules.
    with cluster.unchecked_jobs():
        cluster.create(body)
    st = cluster.wait_phase("broken", "Failed")
    assert any(c["type"] == "Failed" and c["reason"] == "InvalidSpec" for c in st["conditions"])
    assert "spec.backend" in st["message"] and "spec.env[0].name" in st["message"]
    assert cluster.wait_event("broken", "InvalidSpec")["type"] == "Warning"
    # A valid job created afterwards completes: the invalid one had every chance to act.
    cluster.create(ddpjob("valid", nodes=1))
    cluster.run_to_success("valid", 1)
    assert cluster.pods("broken") == [] and cluster.service("broken") is None


def test_changing_an_immutable_field_fails_the_job(cluster: Cluster, operator) -> None:
    cluster.start_running(ddpjob("imm", nodes=2))
    # The API server refuses the change (a CEL transition rule) ...
    with pytest.raises(kubernetes.client.ApiException) as refused:
        cluster.patch_spec("imm", nodes=3)
    assert refused.value.status == 422 and "spec.nodes" in str(refused.value.body)
    # ... and where it got through anyway, the operator fails the job.
    with cluster.unchecked_jobs():
        cluster.patch_spec("imm", nodes=3)
    st = cluster.wait_phase("imm", "Failed")
    assert "spec.nodes: is immutable" in st["message"]
    wait_for(lambda: cluster.pods("imm") == [], message="the gang kept running under a changed spec")
    assert len([p for p in cluster.pods("imm")]) == 0


def test_pod_deleted_by_hand_is_a_gang_failure(cluster: Cluster, operator) -> None:
    cluster.start_running(ddpjob("hand", nodes=2, restartPolicy="OnFailure"))
    cluster.core.delete_namespaced_pod("hand-1", cluster.ns)
    cluster.wait_pods("hand", 2, restart_count=1)
    st = cluster.status("hand")
    assert st["restarts"] == 1 and st["lastFailure"]["reason"] == "PodDeleted"


def test_a_gang_restart_brings_back_a_service_deleted_by_hand(cluster: Cluster, operator) -> None:
    cluster.create(ddpjob("svc", nodes=2, restartPolicy="OnFailure", maxRestarts=2))
    cluster.wait_pods("svc", 2)
    assert cluster.service("svc") is not None
    cluster.core.delete_namespaced_service("svc", cluster.ns)
    cluster.set_phase("svc", "Running")
    cluster.wait_phase("svc", "Running")
    cluster.set_phase("svc", "Failed", ranks=[0], exit_code=137)
    cluster.wait_pods("svc", 2, restart_count=1)
    service = wait_for(lambda: cluster.service("svc"), timeout=REACTION, message="Service recreated")
    assert service is not None
    assert service["spec"]["clusterIP"] == "None"


def test_pod_events_leave_no_success_line_per_pod_in_the_log(cluster: Cluster, operator) -> None:
    import logging

    class Collect(logging.Handler):
        def __init__(self) -> None:
            super().__init__()
            self.messages: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.messages.append(record.getMessage())

    collect, log = Collect(), logging.getLogger("kopf.objects")
    level = log.level
    log.setLevel(logging.INFO)  # as `ddpjob operator` runs it (kopf.configure)
    log.addHandler(collect)
    try:
        cluster.create(ddpjob("quiet", nodes=2))
        cluster.wait_pods("quiet", 2)
        cluster.set_phase("quiet", "Running", ranks=[0, 1])
        cluster.wait_phase("quiet", "Running", readyNodes=2)
    finally:
        log.removeHandler(collect)
        log.setLevel(level)
    assert "Handler 'job_created' succeeded." in collect.messages  # the job's own lines stay
    assert not [m for m in collect.messages if "pod_event" in m]


def test_a_rewritten_bookkeeping_annotation_does_not_steer_the_operator(cluster: Cluster, operator) -> None:
    """kopf keeps the last spec it handled in an annotation anyone who may edit the job can
    rewrite; an "old" spec with other immutable values there must not fail the job, alone
    or met by the owner's own change of spec (issue 40: the job failed with `spec.image:
    is immutable` when the two landed together)."""
    import json

    cluster.start_running(ddpjob("kept", nodes=2, activeDeadlineSeconds=3600))
    key = "ddpjob.io/last-handled-configuration"
    stored = json.loads(cluster.stored("kept")["metadata"]["annotations"][key])
    forged = json.dumps({**stored, "spec": {**stored["spec"], "nodes": 7, "image": "evil/image"}})
    cluster.custom.patch_namespaced_custom_object(
        "ddpjob.io", "v1alpha1", cluster.ns, "ddpjobs", "kept", {"metadata": {"annotations": {key: forged}}}
    )
    # kopf sees a spec "change" against the forged annotation and re-writes it once handled.
    wait_for(
        lambda: json.loads(cluster.stored("kept")["metadata"]["annotations"][key])["spec"]["nodes"] == 2,
        message="kopf did not handle the rewritten annotation",
    )
    for deadline in (3601, 3602):  # the forgery and a real change of spec in one write
        cluster.custom.patch_namespaced_custom_object(
            "ddpjob.io",
            "v1alpha1",
            cluster.ns,
            "ddpjobs",
            "kept",
            {"metadata": {"annotations": {key: forged}}, "spec": {"activeDeadlineSeconds": deadline}},
        )
        generation = cluster.stored("kept")["metadata"]["generation"]
        st = wait_for(
            lambda: (s := cluster.status("kept")).get("observedGeneration") == generation and s,  # noqa: B023 - the wait calls it before the loop moves on
            message="the operator did not observe the owner's change",
        )
        assert st["phase"] == "Running" and "immutable" not in st.get("message", ""), st
    assert len(cluster.pods("kept")) == 2
