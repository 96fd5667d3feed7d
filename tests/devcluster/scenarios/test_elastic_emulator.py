"""The elastic scenario of tests/system/test_elastic_real.py on the development cluster's
emulator and process kubelet, so the two backends are held to the same bar."""

from __future__ import annotations

import pytest

from ddpjob_devcluster.clusters.local import LocalCluster
from ddpjob_devcluster.scenarios import elastic as elastic_scenario
from tests.support.deadlines import CLUSTER_TEST, RUN

pytestmark = [pytest.mark.slow, pytest.mark.timeout(CLUSTER_TEST)]


def test_a_deleted_pod_shrinks_the_elastic_job_which_grows_back(tmp_path) -> None:
    with LocalCluster(tmp_path / "cluster", stop_grace=5.0) as cluster:
        kubelet = cluster.kubelet
        assert kubelet is not None
        out = elastic_scenario.run(
            cluster, "elastic", tmp_path, elastic=True, step_seconds=0.25, start_timeout=RUN, timeout=RUN, release=True
        )
    assert not kubelet.live_processes()
    assert out.status["phase"] == "Succeeded" and out.status["restarts"] == 0, out.status
    assert out.survivors_kept and out.status["nodes"] == "4/4"
    assert any(e.startswith("NodeLost: training at 3/4 nodes: lost elastic-2") for e in out.events), out.events
    assert (out.lost, out.repeated) == (0, 0)
