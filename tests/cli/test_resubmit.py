"""`ddpjob submit` of a job that already exists (cli/resubmit.py): after `kubectl apply`,
a changed immutable field is refused in one line with the way out; a conflict over a field
that may change names its owner and --force-conflicts; a finished job is said to run nothing."""

from __future__ import annotations

import kubernetes
import pytest

from ddpjob_devcluster.clusters.client import wait_until
from tests.cli.conftest import Namespace, writes
from tests.cli.test_cluster_commands import JOB, ddpjob, job_file
from tests.support.cluster_users import bind
from tests.support.deadlines import REACTION, TEST

pytestmark = pytest.mark.timeout(TEST)
GROUP, VERSION, PLURAL = "ddpjob.io", "v1alpha1", "ddpjobs"


def kubectl_apply(cluster: Namespace, **spec) -> None:
    """What `kubectl apply` (client-side) writes: a create under its field manager."""
    body = {**JOB, "spec": {**JOB["spec"], **spec}}
    cluster.custom.create_namespaced_custom_object(
        GROUP, VERSION, cluster.namespace, PLURAL, body, field_manager="kubectl-client-side-apply"
    )


def test_a_changed_immutable_field_after_kubectl_apply_is_refused_with_the_way_out(
    capsys, cluster, sent, tmp_path
) -> None:
    kubectl_apply(cluster, args=["ddpjob-train", "--epochs", "1"])
    before = cluster.job("hello")
    sent.clear()  # from here: what the command sends
    code, out, err = ddpjob(capsys, "submit", job_file(tmp_path, args=["ddpjob-train", "--epochs", "2"]))
    path = tmp_path / "job.yaml"
    assert (code, out) == (1, "")
    assert err == (
        f"error: {path}: spec.args: is immutable\n"
        f"{path}: DDPJob hello already exists with another spec.args, which cannot change: "
        "`ddpjob delete hello`, then submit again, to run it with this file\n"
    )
    assert writes(sent) == []  # nothing sent
    assert cluster.job("hello") == before


def test_submitting_a_finished_job_says_nothing_runs_again(capsys, cluster, tmp_path) -> None:
    ddpjob(capsys, "submit", job_file(tmp_path))
    cluster.set_status("hello", phase="Succeeded", completionTime="2026-11-28T05:00:00Z")
    code, out, err = ddpjob(capsys, "submit", "--wait", job_file(tmp_path, maxRestarts=5))
    assert code == 0
    assert out.splitlines()[0] == "ddpjob.ddpjob.io/hello"
    assert err == (
        "hello: already Succeeded (at 2026-11-28T05:00:00Z): submitting a finished job runs nothing "
        "again; `ddpjob delete hello`, then submit, to run it again\n"
    )
    cluster.set_status("hello", phase="Running")  # a running job: nothing to say
    code, out, err = ddpjob(capsys, "submit", job_file(tmp_path))
    assert (code, err) == (0, "")


def test_a_conflict_over_a_field_that_may_change_names_its_owner_and_the_flag(capsys, cluster, tmp_path) -> None:
    body = {**JOB, "spec": {**JOB["spec"], "maxRestarts": 2}}
    cluster.custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        cluster.namespace,
        PLURAL,
        "hello",
        body,
        field_manager="kubectl",
        _content_type="application/apply-patch+yaml",
    )
    code, out, err = ddpjob(capsys, "submit", job_file(tmp_path, maxRestarts=5))
    assert (code, out) == (1, "")
    assert err.startswith(
        "error: hello: fields of this file are owned by another manager, kubectl (kubectl apply): "
        'Apply failed with 1 conflict: conflict with "kubectl": .spec.maxRestarts; '
    )
    assert err.endswith("`ddpjob submit --force-conflicts` takes them over\n") and err.count("\n") == 1
    code, _, _ = ddpjob(capsys, "submit", "--force-conflicts", job_file(tmp_path, maxRestarts=5))
    assert code == 0 and (cluster.job("hello") or {})["spec"]["maxRestarts"] == 5


def test_a_user_who_may_not_read_the_job_still_submits(capsys, cluster, tmp_path, monkeypatch) -> None:
    ddpjob(capsys, "submit", job_file(tmp_path))
    patcher = bind(cluster, "patcher", {"rules": [{"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["patch"]}]})
    monkeypatch.setenv("KUBECONFIG", str(patcher))
    may("patcher", "patch", cluster)
    code, out, err = ddpjob(capsys, "submit", job_file(tmp_path, maxRestarts=6))
    assert (code, out.strip(), err) == (0, "ddpjob.ddpjob.io/hello", "")
    assert (cluster.job("hello") or {})["spec"]["maxRestarts"] == 6


def may(user: str, verb: str, cluster: Namespace) -> None:
    """Wait until the API server's authorizer has the user's new binding (its RBAC informer
    sees a RoleBinding a moment after it is stored)."""
    review = {
        "spec": {
            "user": user,
            "resourceAttributes": {
                "group": GROUP,
                "resource": PLURAL,
                "verb": verb,
                "namespace": cluster.namespace,
            },
        }
    }
    authorization = kubernetes.client.AuthorizationV1Api(cluster.api)

    def allowed() -> bool:
        answer = authorization.create_subject_access_review(review)  # type: ignore[arg-type]  # a dict body: the client sends it as it is
        return bool(answer.status and answer.status.allowed)

    wait_until(allowed, REACTION, f"{user} was never allowed to {verb} {PLURAL}")
