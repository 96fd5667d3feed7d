"""The issue's bar, on the real control plane (upstream kube-apiserver, scheduler, etcd;
process kubelets; the chart-installed operator): a 4-node elastic job (minNodes 2) loses a
Pod to a delete mid-run, keeps its other Pods (no gang restart), re-creates the lost one,
grows back to 4 and finishes with every sample trained on exactly once per epoch."""
from __future__ import annotations

import pytest

from ddpjob_devcluster.scenarios import elastic as elastic_scenario

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_a_deleted_pod_shrinks_the_elastic_job_which_grows_back(cluster, tmp_path) -> None:
    out = elastic_scenario.run(cluster, "elastic", tmp_path, elastic=True, step_seconds=0.25)
    print(elastic_scenario.report("elastic", out))
    assert out.status["phase"] == "Succeeded", out.status
    assert out.status["restarts"] == 0 and out.status["resizes"] >= 2 and out.status["nodes"] == "4/4"
    assert out.survivors_kept  # Pods 0, 1 and 3 are the same objects: no gang restart
    assert any(e.startswith("NodeLost: training at 3/4 nodes: lost elastic-2") for e in out.events), out.events
    assert any(e.startswith("Resized: training at 4/4 nodes") for e in out.events), out.events
    assert out.groups[0][0] == 4 and out.groups[-1][0] == 4 and out.grown_back_s is not None
    assert (out.lost, out.repeated) == (0, 0)
    # The per-index re-create backoff's count, stored by the real API server (the CRD's schema
    # keeps it) while the index was down; gone once the job finished.
    assert out.lost_indices and (out.lost_indices[0]["index"], out.lost_indices[0]["losses"]) == (2, 1), out.events
    assert "lostIndices" not in out.status


def test_the_real_api_server_lets_an_elastic_job_resize_within_its_range_only(cluster) -> None:
    body = elastic_scenario.job("range", cluster.workdir / "unused", elastic=True)
    body["spec"]["suspend"] = True  # the API's answers are the point, not the training
    cluster.create_job(body)
    inside = cluster.kubectl("patch", "ddpj", "range", "--type=merge", "-p", '{"spec":{"nodes":3}}', check=False)
    assert inside.returncode == 0, inside.stderr
    outside = cluster.kubectl("patch", "ddpj", "range", "--type=merge", "-p", '{"spec":{"nodes":5}}', check=False)
    assert outside.returncode != 0 and "spec.nodes: must be from spec.elastic.minNodes" in outside.stderr
    moved = cluster.kubectl("patch", "ddpj", "range", "--type=merge", "-p",
                            '{"spec":{"elastic":{"minNodes":1,"maxNodes":4}}}', check=False)
    assert moved.returncode != 0 and "spec.elastic: Invalid value: is immutable: running Pods were started with this range" in moved.stderr, moved.stderr
    assert cluster.job("range")["spec"]["nodes"] == 3
