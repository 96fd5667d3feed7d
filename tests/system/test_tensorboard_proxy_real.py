"""`ddpjob tensorboard --via proxy` (cli/service_proxy.py) against the real kube-apiserver,
as a local process on the user's machine would use it: a request that carries a second one
in its body (both framings: Go's net/http reads the body as chunked) does not reach the API
server as a second request with the user's rights. The stand-in of
tests/cli/test_service_proxy_smuggling.py covers the variants; this checks the framing
the real server applies."""

from __future__ import annotations

import pytest

from ddpjob.cli.service_proxy import ServiceProxy
from ddpjob.cluster.connection import connect
from ddpjob_devcluster.clusters.client import wait_until
from tests.cli.test_service_proxy_smuggling import host_of, send
from tests.support.cluster_users import bind
from tests.support.deadlines import CLUSTER_TEST, REACTION

pytestmark = [pytest.mark.slow, pytest.mark.timeout(CLUSTER_TEST)]


def test_a_smuggled_request_does_not_reach_the_real_api_server(cluster) -> None:
    ns = cluster.namespace
    cluster.core.create_namespaced_config_map(ns, {"metadata": {"name": "victim-cm"}, "data": {"kept": "yes"}})
    kubeconfig = bind(cluster, "owner", "edit")  # the user running `ddpjob tensorboard`: may delete it
    wait_until(
        lambda: (
            cluster.kubectl(
                f"--kubeconfig={kubeconfig}", "auth", "can-i", "delete", "configmaps", check=False
            ).stdout.strip()
            == "yes"
        ),
        REACTION,
        "edit did not apply",
    )
    conn = connect(kubeconfig=str(kubeconfig), namespace=ns)
    proxy = ServiceProxy(conn, "board-tensorboard", 6006).start()
    try:
        smuggled = f"0\r\n\r\nDELETE /api/v1/namespaces/{ns}/configmaps/victim-cm HTTP/1.1\r\nX-Absorb: ".encode()
        status, body = send(
            proxy,
            (
                f"POST /data/plugin/timeseries/timeSeries HTTP/1.1\r\nHost: {host_of(proxy)}\r\n"
                f"Content-Length: {len(smuggled)}\r\nTransfer-Encoding: chunked\r\n\r\n"
            ).encode()
            + smuggled,
        )
        answers = [send(proxy, f"GET /data/runs HTTP/1.1\r\nHost: {host_of(proxy)}\r\n\r\n".encode()) for _ in range(2)]
    finally:
        proxy.stop()
        conn.api.close()
    # The ConfigMap is still there, and each GET got the API server's own answer to it (the
    # Service does not exist), not the DELETE's.
    assert cluster.core.read_namespaced_config_map("victim-cm", ns).data == {"kept": "yes"}
    for got in answers:
        assert got[0] == 404 and b"board-tensorboard" in got[1] and b"victim-cm" not in got[1], got
    assert status == 411, (status, body)
