"""spec.tensorboard through the real operator on the real kube-apiserver: the NetworkPolicy,
Deployment and Service made, owned by the job and reported in status.tensorboard; removed when the field
is turned off and with the job; a name someone else holds reported, never taken."""

from __future__ import annotations

from typing import Any

import kubernetes

from ddpjob_devcluster.clusters.operator_runner import wait_for
from tests.operator.conftest import Cluster, ddpjob
from tests.support.deadlines import REACTION

CHECKPOINT = {"claimName": "ckpt"}


def board_job(name: str, **spec: Any) -> dict[str, Any]:
    return ddpjob(name, tensorboard=True, checkpoint=CHECKPOINT, **spec)


def _read(cluster: Cluster, read: Any, name: str) -> dict[str, Any] | None:
    try:
        return cluster.api.sanitize_for_serialization(read(name, cluster.ns))
    except kubernetes.client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def deployment(cluster: Cluster, name: str) -> dict[str, Any] | None:
    return _read(cluster, kubernetes.client.AppsV1Api(cluster.api).read_namespaced_deployment, name)


def network_policy(cluster: Cluster, name: str) -> dict[str, Any] | None:
    return _read(cluster, kubernetes.client.NetworkingV1Api(cluster.api).read_namespaced_network_policy, name)


def wait_board(cluster: Cluster, job: str) -> dict[str, Any]:
    return wait_for(
        lambda: cluster.status(job).get("tensorboard"),
        timeout=REACTION,
        message=f"{job}: no status.tensorboard (status {cluster.status(job)})",
    )


def test_a_job_with_tensorboard_gets_a_deployment_and_service_it_owns(cluster: Cluster, operator) -> None:
    uid = cluster.create(board_job("tb"))["metadata"]["uid"]
    board = wait_board(cluster, "tb")
    assert board == {"url": f"http://tb-tensorboard.{cluster.ns}.svc:6006/", "service": "tb-tensorboard"}
    made = [
        deployment(cluster, "tb-tensorboard"),
        cluster.service("tb-tensorboard"),
        network_policy(cluster, "tb-tensorboard"),
    ]
    for obj in made:
        assert obj is not None
        (owner,) = obj["metadata"]["ownerReferences"]
        assert owner["uid"] == uid and owner["controller"] is True
    # The training gang is made as ever, and the TensorBoard's Pod is none of its Pods.
    cluster.wait_pods("tb", 1)
    made_deployment = made[0]
    assert made_deployment is not None
    assert "ddpjob.io/job-name" not in made_deployment["spec"]["template"]["metadata"]["labels"]

    # With the job, they go (the garbage collector, by owner reference).
    cluster.delete("tb")
    wait_for(
        lambda: deployment(cluster, "tb-tensorboard") is None and cluster.service("tb-tensorboard") is None,
        timeout=REACTION,
        message="the TensorBoard outlived its job",
    )


def test_turning_it_off_removes_it_and_on_again_makes_it_again(cluster: Cluster, operator) -> None:
    cluster.create(board_job("tb"))
    wait_board(cluster, "tb")
    cluster.patch_spec("tb", tensorboard=False)
    wait_for(
        lambda: "tensorboard" not in cluster.status("tb") and deployment(cluster, "tb-tensorboard") is None,
        timeout=REACTION,
        message=f"the TensorBoard was not removed (status {cluster.status('tb')})",
    )
    assert cluster.service("tb") is not None  # the job's own headless Service stays
    # Its Service stays too, with no Pod behind it, until the job goes: the operator may not delete Services.
    assert cluster.service("tb-tensorboard") is not None
    cluster.patch_spec("tb", tensorboard=True)
    assert wait_board(cluster, "tb")["service"] == "tb-tensorboard"
    assert deployment(cluster, "tb-tensorboard") is not None


def test_a_name_held_by_another_object_is_reported_not_taken(cluster: Cluster, operator) -> None:
    held = {"metadata": {"name": "tb-tensorboard"}, "spec": {"ports": [{"port": 80}]}}
    cluster.core.create_namespaced_service(cluster.ns, held)  # type: ignore[arg-type]  # a dict body: the client sends it as it is
    cluster.create(board_job("tb"))
    board = wait_board(cluster, "tb")
    assert "already exists and is not controlled by DDPJob 'tb'" in board["message"], board
    service = cluster.service("tb-tensorboard")
    assert service is not None and service["spec"]["ports"][0]["port"] == 80  # untouched
    cluster.run_gang("tb", 1)  # the training is not held back by it


def test_a_job_without_it_gets_none_and_no_request_is_made(cluster: Cluster, operator) -> None:
    cluster.start_running(ddpjob("plain", checkpoint=CHECKPOINT))
    assert "tensorboard" not in cluster.status("plain")
    assert not [r for r in cluster.requests if r.resource == "deployments"]


def test_the_api_server_refuses_it_without_a_checkpoint(cluster: Cluster) -> None:
    try:
        cluster.create(ddpjob("nock", tensorboard=True))
    except kubernetes.client.ApiException as exc:
        assert exc.status == 422 and "spec.tensorboard" in str(exc.body) and "needs spec.checkpoint" in str(exc.body)
    else:
        raise AssertionError("a job with tensorboard and no checkpoint was accepted")
