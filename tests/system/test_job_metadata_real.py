"""Who may take a job's names, and who may write what decides its life, on the real control
plane with the chart's admission policy (docs/threat-model.md, issue 40):

- a job's name is its Service's and its Pods': only an author who may create Services and
  Pods in the namespace may create one (a job-only user's `postgres` took a teammate's
  Service and StatefulSet Pod names);
- the operator's bookkeeping annotations (`ddpjob.io/*`) are the operator's to write, a
  job's ownerReferences and finalizers its deleters';
- and the operator itself decides nothing from kopf's annotation: a forged one written with
  the owner's own change of spec leaves the job running (it failed with `spec.image: is
  immutable`).
"""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

from ddpjob_devcluster.clusters.client import json_object, wait_until
from ddpjob_devcluster.clusters.real import RealCluster
from tests.support.cluster_users import (
    JOB_ONLY,
    POD_MAKER,
    as_user,
    bind,
    job,
    patch_as,
    wait_for_edit_to_include_ddpjobs,
)
from tests.support.deadlines import CLUSTER_TEST, PHASE, REACTION

pytestmark = [pytest.mark.slow, pytest.mark.timeout(CLUSTER_TEST)]

POLICY = "ddpjob-author-rights"
BOOKKEEPING = "ddpjob.io/last-handled-configuration"
SLEEP = [sys.executable, "-c", "import time; time.sleep(900)"]


def test_a_job_takes_only_names_its_author_could_take(cluster: RealCluster, tmp_path: pathlib.Path) -> None:
    mallory, alice = bind(cluster, "mallory", JOB_ONLY), bind(cluster, "alice", "edit")
    pods_only = bind(
        cluster, "pat", {"rules": [*JOB_ONLY["rules"], {"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]}
    )
    wait_for_edit_to_include_ddpjobs(cluster, alice)

    refused = as_user(cluster, mallory, tmp_path, "create", job("postgres", nodes=2))
    assert refused.returncode != 0 and POLICY in refused.stderr, refused.stderr
    assert (
        f"metadata.name: the job takes the Service name postgres in namespace {cluster.namespace}, and mallory "
        "may not create Services there"
    ) in refused.stderr, refused.stderr
    refused = as_user(cluster, pods_only, tmp_path, "create", job("postgres", nodes=2))
    assert "pat may not create Services there" in refused.stderr, refused.stderr
    assert (
        json_object(
            cluster.custom.list_namespaced_custom_object("ddpjob.io", "v1alpha1", cluster.namespace, "ddpjobs")
        )["items"]
        == []
    )
    # So the name is still the teammate's to take.
    made = cluster.kubectl(
        f"--kubeconfig={alice}",
        "create",
        "service",
        "clusterip",
        "postgres",
        "--tcp=5432",
        "-n",
        cluster.namespace,
        check=False,
    )
    assert made.returncode == 0, made.stderr

    # Pods but no Services is refused for the Service; Services but no Pods for the Pods.
    services_only = bind(
        cluster,
        "sam",
        {"rules": [*JOB_ONLY["rules"], {"apiGroups": [""], "resources": ["services"], "verbs": ["create"]}]},
    )
    refused = as_user(cluster, services_only, tmp_path, "create", job("cache", nodes=2))
    assert "the job takes the Pod names cache-0, cache-1, ... in namespace" in refused.stderr, refused.stderr
    assert "sam may not create Pods there" in refused.stderr, refused.stderr

    # Whoever may create both runs jobs as before, `edit` users included.
    paul = bind(cluster, "paul", POD_MAKER)
    assert as_user(cluster, paul, tmp_path, "create", job("paul-job")).returncode == 0
    assert as_user(cluster, alice, tmp_path, "create", job("alice-job")).returncode == 0
    cluster.wait_phase("paul-job", "Succeeded", timeout=PHASE)
    cluster.wait_phase("alice-job", "Succeeded", timeout=PHASE)

    # spec.tensorboard takes NAME-tensorboard for a Deployment and a Service too.
    curves = job("curves", checkpoint={"volume": {"emptyDir": {}}}, tensorboard=True)
    refused = as_user(cluster, paul, tmp_path, "create", curves, "--dry-run=server")
    assert (
        f"spec.tensorboard: the job takes the Deployment and Service name curves-tensorboard in namespace "
        f"{cluster.namespace}, and paul may not create both there"
    ) in refused.stderr, refused.stderr
    assert as_user(cluster, alice, tmp_path, "create", curves, "--dry-run=server").returncode == 0


def test_what_decides_a_jobs_life_is_written_by_the_operator_or_its_deleters(
    cluster: RealCluster, tmp_path: pathlib.Path
) -> None:
    mallory, alice = bind(cluster, "mallory", POD_MAKER), bind(cluster, "alice", "edit")
    wait_for_edit_to_include_ddpjobs(cluster, alice)
    assert (
        as_user(
            cluster, alice, tmp_path, "create", job("owned", nodes=2, command=SLEEP, activeDeadlineSeconds=3600)
        ).returncode
        == 0
    )
    cluster.wait_phase("owned", "Running", timeout=PHASE)
    owned_job = json_object(
        cluster.custom.get_namespaced_custom_object("ddpjob.io", "v1alpha1", cluster.namespace, "ddpjobs", "owned")
    )
    stored = json.loads(owned_job["metadata"]["annotations"][BOOKKEEPING])
    forged = json.dumps({**stored, "spec": {**stored["spec"], "image": "evil/image"}})

    # kopf's bookkeeping: neither a teammate nor the owner (neither may write the status).
    for user, kubeconfig in (("mallory", mallory), ("alice", alice)):
        written = patch_as(
            cluster, kubeconfig, "owned", json.dumps({"metadata": {"annotations": {BOOKKEEPING: forged}}})
        )
        assert written.returncode != 0 and POLICY in written.stderr, (user, written.stderr)
        assert (
            f"metadata.annotations[{BOOKKEEPING}]: only the ddpjob operator writes annotations under ddpjob.io/ "
            f"({user} may not write the status of DDPJob owned)"
        ) in written.stderr, written.stderr

    # Owners and finalizers: not by whoever may not delete the job (an owner that goes away
    # has the garbage collector delete it) ...
    gone_owner = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "soon-gone",
        "uid": "00000000-0000-0000-0000-000000000000",
    }
    owned = patch_as(cluster, mallory, "owned", json.dumps({"metadata": {"ownerReferences": [gone_owner]}}))
    assert owned.returncode != 0 and "metadata.ownerReferences: mallory may not delete DDPJob owned" in owned.stderr
    held = patch_as(cluster, mallory, "owned", json.dumps({"metadata": {"finalizers": ["mallory.example/hold"]}}))
    assert held.returncode != 0 and "metadata.finalizers: mallory may not delete DDPJob owned" in held.stderr
    # ... while the owner, who may delete it, may; and labels stay everyone's with `patch`.
    assert patch_as(cluster, alice, "owned", '{"metadata":{"finalizers":["team.example/keep"]}}').returncode == 0
    assert patch_as(cluster, alice, "owned", '{"metadata":{"finalizers":null}}').returncode == 0
    assert patch_as(cluster, mallory, "owned", '{"metadata":{"labels":{"seen":"yes"}}}').returncode == 0

    # The operator decides nothing from kopf's annotation: the forgery and the owner's own
    # change of spec in one write (as the review's loop landed them; an admin may write
    # both) leave the job running, each change observed.
    for deadline in (3601, 3602, 3603):
        cluster.custom.patch_namespaced_custom_object(
            "ddpjob.io",
            "v1alpha1",
            cluster.namespace,
            "ddpjobs",
            "owned",
            {"metadata": {"annotations": {BOOKKEEPING: forged}}, "spec": {"activeDeadlineSeconds": deadline}},
        )
        generation = json_object(
            cluster.custom.get_namespaced_custom_object("ddpjob.io", "v1alpha1", cluster.namespace, "ddpjobs", "owned")
        )["metadata"]["generation"]
        st = wait_until(
            lambda: (s := cluster.status("owned")).get("observedGeneration") == generation and s,  # noqa: B023 - the wait calls it before the loop moves on
            REACTION,
            "the operator did not observe the owner's change",
            lambda: cluster.status("owned"),
        )
        assert st["phase"] == "Running" and "immutable" not in st.get("message", ""), st
    assert len(cluster.pods("owned")) == 2


def test_changing_a_jobs_spec_needs_the_rights_creating_it_does(cluster: RealCluster, tmp_path: pathlib.Path) -> None:
    """A job's spec is what its Pods run, in its author's name: a user who may only patch
    DDPJobs set a teammate's template command and checkpoint claim, and the operator ran
    that command with that claim (its log readable to them)."""
    mallory, alice = bind(cluster, "mallory", JOB_ONLY), bind(cluster, "alice", "edit")
    paul = bind(cluster, "paul", POD_MAKER)
    wait_for_edit_to_include_ddpjobs(cluster, alice)
    team = job("team", suspend=True, checkpoint={"volume": {"emptyDir": {}}})
    del team["spec"]["command"]  # the trainer's own: the template may then set the container's command
    assert as_user(cluster, alice, tmp_path, "create", team).returncode == 0

    def stored_spec() -> dict:
        return json_object(
            cluster.custom.get_namespaced_custom_object("ddpjob.io", "v1alpha1", cluster.namespace, "ddpjobs", "team")
        )["spec"]

    before = stored_spec()
    hijack = {
        "spec": {
            "suspend": False,
            "checkpoint": {"volume": None, "claimName": "another-teams-claim"},
            "template": {
                "spec": {
                    "containers": [{"name": "trainer", "command": ["sh", "-c", "ls /ckpt"]}],
                    "initContainers": [{"name": "first", "image": "busybox"}],
                }
            },
        }
    }
    for patch in (hijack, {"spec": {"suspend": False}}, {"spec": {"activeDeadlineSeconds": 60}}):
        refused = patch_as(cluster, mallory, "team", json.dumps(patch))
        assert refused.returncode != 0 and POLICY in refused.stderr, (patch, refused.stderr)
        assert (
            "spec: changing the spec of DDPJob team needs the rights creating it does, and mallory may not create"
        ) in refused.stderr and f"in namespace {cluster.namespace}" in refused.stderr, refused.stderr
    assert stored_spec() == before
    # Metadata stays everyone's with `patch`.
    assert patch_as(cluster, mallory, "team", '{"metadata":{"labels":{"seen":"yes"}}}').returncode == 0

    # The owner's own edits go through, and so do those of a teammate who may create the
    # job's Pods and Service (what a Pod of their own could run anyway).
    edit = cluster.kubectl(
        f"--kubeconfig={alice}",
        "patch",
        "ddpj",
        "team",
        "-n",
        cluster.namespace,
        "--type=merge",
        "-p",
        json.dumps(hijack),
        "--dry-run=server",
        check=False,
    )
    assert edit.returncode == 0, edit.stderr
    assert patch_as(cluster, alice, "team", '{"spec":{"activeDeadlineSeconds":3600}}').returncode == 0
    assert patch_as(cluster, paul, "team", '{"spec":{"activeDeadlineSeconds":3601}}').returncode == 0
    assert stored_spec()["activeDeadlineSeconds"] == 3601
