"""The operator against a struggling real API server: a proxy in front of kube-apiserver
answers a share of the operator's requests with 500/503/429 and cuts its watch streams
every few seconds (`ddpjob_devcluster.scenarios.fault_proxy`); the job still runs to Succeeded with
a true status, no Pod created twice."""

from __future__ import annotations

import sys

import pytest

from ddpjob_devcluster.scenarios.chaos import Chaos
from ddpjob_devcluster.scenarios.fault_proxy import FaultProxy, point_kubeconfig_at
from tests.support.control_plane import real_cluster
from tests.support.deadlines import CLUSTER_TEST, RUN

pytestmark = [pytest.mark.slow, pytest.mark.timeout(CLUSTER_TEST)]

SCRIPT = "import os, time; time.sleep(2); print('node', os.environ['NODE_RANK'])"


def test_a_job_succeeds_through_a_struggling_real_api_server(request, tmp_path) -> None:
    with real_cluster(request, tmp_path / "cluster") as cluster:
        kubelet, op = cluster.kubelet, cluster.operator
        assert kubelet is not None and op is not None  # started
        op.stop()  # started by real_cluster: restart it behind the proxy
        proxy = FaultProxy(cluster.plane.server, cluster.plane.ca, Chaos(rate=0.2, watch_lifetime=3.0, seed=7)).start()
        try:
            point_kubeconfig_at(op.kubeconfig, proxy.url)
            op.start()
            body = {
                "apiVersion": "ddpjob.io/v1alpha1",
                "kind": "DDPJob",
                "metadata": {"name": "rough"},
                "spec": {
                    "nodes": 3,
                    "nprocPerNode": 1,
                    "image": "ddpjob/trainer:test",
                    "command": [sys.executable, "-c", SCRIPT],
                    "restartBackoffSeconds": 0,
                },
            }
            cluster.create_job(body)
            status = cluster.wait_phase("rough", "Succeeded", timeout=RUN)
        finally:
            proxy.stop()
        assert status["restarts"] == 0 and status["readyNodes"] == 3
        pods = cluster.pods("rough")
        assert [p["metadata"]["name"] for p in pods] == ["rough-0", "rough-1", "rough-2"]
        assert len(kubelet.containers) == 3  # no Pod was created twice
        assert proxy.chaos.failed >= 5 and proxy.chaos.passed > proxy.chaos.failed, (
            proxy.chaos.failed,
            proxy.chaos.passed,
        )
        assert proxy.cut_watches >= 1  # the operator's watches were cut and resumed
