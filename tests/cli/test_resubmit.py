"""`ddpjob submit` of a job that already exists (cli/resubmit.py): after `kubectl apply`,
a changed immutable field is refused in one line with the way out; a conflict over a field
that may change names its owner and --force-conflicts; a finished job is said to run nothing."""

from __future__ import annotations

import kmock
import kubernetes
import pytest

from tests.cli.test_cluster_commands import JOB, ddpjob, job_file

pytestmark = pytest.mark.timeout(60)
PATH = ("ddpjob.io/v1alpha1/ddpjobs", "team-a", "hello")


def kubectl_apply(kubeconfig, **spec) -> None:
    """What `kubectl apply` (client-side) writes: a create under its field manager."""
    api = kubernetes.client.CustomObjectsApi(kubernetes.config.new_client_from_config(str(kubeconfig)))
    body = {**JOB, "spec": {**JOB["spec"], **spec}}
    api.create_namespaced_custom_object(
        "ddpjob.io", "v1alpha1", "team-a", "ddpjobs", body, field_manager="kubectl-client-side-apply"
    )


def set_status(emu, **fields) -> None:
    emu.store.patch(kmock.resource(PATH[0]), *PATH[1:], "status", "application/merge-patch+json", {"status": fields})


def test_a_changed_immutable_field_after_kubectl_apply_is_refused_with_the_way_out(
    capsys, with_crd, kubeconfig, tmp_path
) -> None:
    kubectl_apply(kubeconfig, args=["ddpjob-train", "--epochs", "1"])
    before = with_crd.writes()
    code, out, err = ddpjob(capsys, "submit", job_file(tmp_path, args=["ddpjob-train", "--epochs", "2"]))
    path = tmp_path / "job.yaml"
    assert (code, out) == (1, "")
    assert err == (
        f"error: {path}: spec.args: is immutable\n"
        f"{path}: DDPJob hello already exists with another spec.args, which cannot change: "
        "`ddpjob delete hello`, then submit again, to run it with this file\n"
    )
    assert with_crd.writes() == before  # nothing sent
    assert with_crd.get_object(*PATH)["spec"]["args"] == ["ddpjob-train", "--epochs", "1"]


def test_submitting_a_finished_job_says_nothing_runs_again(capsys, with_crd, kubeconfig, tmp_path) -> None:
    ddpjob(capsys, "submit", job_file(tmp_path))
    set_status(with_crd, phase="Succeeded", completionTime="2026-11-28T05:00:00Z")
    code, out, err = ddpjob(capsys, "submit", "--wait", job_file(tmp_path, maxRestarts=5))
    assert code == 0
    assert out.splitlines()[0] == "ddpjob.ddpjob.io/hello"
    assert err == (
        "hello: already Succeeded (at 2026-11-28T05:00:00Z): submitting a finished job runs nothing "
        "again; `ddpjob delete hello`, then submit, to run it again\n"
    )
    set_status(with_crd, phase="Running")  # a running job: nothing to say
    code, out, err = ddpjob(capsys, "submit", job_file(tmp_path))
    assert (code, err) == (0, "")


def test_a_conflict_over_a_field_that_may_change_names_its_owner_and_the_flag(
    capsys, with_crd, kubeconfig, tmp_path
) -> None:
    api = kubernetes.client.CustomObjectsApi(kubernetes.config.new_client_from_config(str(kubeconfig)))
    body = {**JOB, "spec": {**JOB["spec"], "maxRestarts": 2}}
    api.patch_namespaced_custom_object(
        "ddpjob.io",
        "v1alpha1",
        "team-a",
        "ddpjobs",
        "hello",
        body,
        field_manager="kubectl",
        _content_type="application/apply-patch+yaml",
    )
    code, out, err = ddpjob(capsys, "submit", job_file(tmp_path, maxRestarts=5))
    assert (code, out) == (1, "")
    assert err.startswith(
        "error: hello: fields of this file are owned by another manager, kubectl (kubectl apply): "
        'Apply failed with 1 conflict(s): conflict with "kubectl": .spec.maxRestarts; '
    )
    assert err.endswith("`ddpjob submit --force-conflicts` takes them over\n") and err.count("\n") == 1
    code, _, _ = ddpjob(capsys, "submit", "--force-conflicts", job_file(tmp_path, maxRestarts=5))
    assert code == 0 and with_crd.get_object(*PATH)["spec"]["maxRestarts"] == 5


def test_a_user_who_may_not_read_the_job_still_submits(capsys, with_crd, kubeconfig, tmp_path) -> None:
    ddpjob(capsys, "submit", job_file(tmp_path))
    with_crd.inject_fault(verb="get", resource="ddpjobs", status=403)
    code, out, err = ddpjob(capsys, "submit", job_file(tmp_path, maxRestarts=6))
    assert (code, out.strip(), err) == (0, "ddpjob.ddpjob.io/hello", "")
    assert with_crd.get_object(*PATH)["spec"]["maxRestarts"] == 6
