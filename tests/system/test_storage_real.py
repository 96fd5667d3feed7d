"""Storage on the real control plane, as a cluster offers it: the README's elastic example
and its checkpoint claim, applied with kubectl as written, run on the default StorageClass
(kube-controller-manager's hostpath provisioner), whose directory goes with the claim."""

from __future__ import annotations

import pathlib

import pytest

from ddpjob_devcluster.clusters.client import ROOT, wait_until
from ddpjob_devcluster.controlplane import storage
from tests.support.deadlines import CLUSTER_TEST, PHASE, RUN

pytestmark = [pytest.mark.slow, pytest.mark.timeout(CLUSTER_TEST)]

EXAMPLES = ROOT / "manifests" / "examples"


def test_the_readme_elastic_example_runs_on_a_claim_of_the_default_storage_class(cluster) -> None:
    # The README's commands, in the cluster's namespace (the kubeconfig's default).
    cluster.kubectl("apply", "-f", str(EXAMPLES / "ckpt-claim.yaml"), "-f", str(EXAMPLES / "elastic-cpu.yaml"))
    claim = wait_until(
        lambda: (
            (c := cluster.core.read_namespaced_persistent_volume_claim("ckpt", cluster.namespace)).status.phase
            == "Bound"
            and c
        ),
        PHASE,
        "the claim was not bound",
        lambda: cluster.kubectl("describe", "pvc", "ckpt", check=False).stdout,
    )
    assert claim.spec.storage_class_name == storage.CLASS_NAME and claim.status.access_modes == ["ReadWriteMany"]
    volume = cluster.core.read_persistent_volume(claim.spec.volume_name)
    made = pathlib.Path(volume.spec.host_path.path)
    assert made.is_dir() and made in storage.provisioned(cluster.plane.admin_kubeconfig)

    # Every Pod placed and running: the claim no longer holds the scheduler back.
    status = wait_until(
        lambda: (st := cluster.status("elastic-cpu")).get("nodes") == "4/4" and st,
        RUN,
        "the elastic example did not run 4/4",
        lambda: cluster.status("elastic-cpu"),
    )
    assert status["phase"] == "Running" and status.get("restarts", 0) == 0
    assert all(
        any(v.get("persistentVolumeClaim") == {"claimName": "ckpt"} for v in p["spec"]["volumes"])
        for p in cluster.pods("elastic-cpu")
    )

    # And the README's last command: the provisioner's deleter removes the directory.
    cluster.kubectl(
        "delete", "-f", str(EXAMPLES / "elastic-cpu.yaml"), "-f", str(EXAMPLES / "ckpt-claim.yaml"), "--wait=false"
    )
    wait_until(lambda: not made.exists(), PHASE, f"{made} was not removed with its claim")
