"""kube.Kube against the real kube-apiserver, through the fault proxy (which injects the
errors): typed errors, idempotent writes, resourceVersion-guarded status patches, retries
of transient errors."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from ddpjob.operator import api_paths, kube
from ddpjob.operator.transport import HttpTransport
from tests.operator.conftest import Cluster, ddpjob

pytestmark = pytest.mark.timeout(60)


def call(cluster: Cluster, fn, **kw: Any) -> Any:
    async def go():
        k = kube.Kube(attempts=kw.pop("attempts", kube.DEFAULT_ATTEMPTS))
        # The proxy presents the operator's certificate: no credentials here.
        k.connect(SimpleNamespace(server=cluster.proxy.url, token=None, insecure=False))
        try:
            return await fn(k)
        finally:
            await k.aclose()

    return asyncio.run(go())


def pod(cluster: Cluster, name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": cluster.ns},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }


def test_create_is_idempotent_and_reads_back_what_exists(cluster: Cluster) -> None:
    first = call(cluster, lambda k: k.create(pod(cluster, "p")))
    again = call(cluster, lambda k: k.create(pod(cluster, "p")))
    assert first[1] is True and again[1] is False
    assert again[0]["metadata"]["uid"] == first[0]["metadata"]["uid"]


def test_errors_are_typed_with_status_reason_and_message(cluster: Cluster) -> None:
    with pytest.raises(kube.NotFound) as info:
        call(cluster, lambda k: k.get(api_paths.pods_path(cluster.ns, "missing")))
    assert (info.value.status, info.value.reason) == (404, "NotFound") and "missing" in info.value.message
    cluster.inject_fault(verb="get", resource="pods", status=403)
    with pytest.raises(kube.Forbidden) as forbidden:
        call(cluster, lambda k: k.get(api_paths.pods_path(cluster.ns, "x")))
    assert forbidden.value.status == 403 and isinstance(forbidden.value, kube.APIError)
    assert call(cluster, lambda k: k.delete(api_paths.pods_path(cluster.ns, "missing"))) is False


def test_422_is_invalid_and_keeps_the_status_details(cluster: Cluster) -> None:
    # The server's 422s come from validation (test_operator_refusals); the mapping is the point here.
    cluster.inject_fault(verb="create", resource="pods", status=422)
    with pytest.raises(kube.Invalid) as info:
        call(cluster, lambda k: k.create(pod(cluster, "bad")))
    assert info.value.status == 422 and not info.value.transient


def test_status_patch_with_a_stale_resource_version_conflicts_and_changes_nothing(cluster: Cluster, crd: dict) -> None:
    created = cluster.create(ddpjob("rv", nodes=1))
    old = created["metadata"]["resourceVersion"]
    ns = cluster.ns
    call(cluster, lambda k: k.patch_status(ns, "rv", {"phase": "Running", "restarts": 1}, resource_version=old))
    with pytest.raises(kube.Conflict) as info:
        call(cluster, lambda k: k.patch_status(ns, "rv", {"phase": "Pending", "restarts": 0}, resource_version=old))
    assert info.value.reason == "Conflict"
    assert cluster.status("rv") == {"phase": "Running", "restarts": 1}


def test_transient_errors_are_retried_then_raised(cluster: Cluster) -> None:
    call(cluster, lambda k: k.create(pod(cluster, "q")))
    cluster.inject_fault(verb="get", resource="pods", status=503, count=2)
    assert call(cluster, lambda k: k.get(api_paths.pods_path(cluster.ns, "q")))["metadata"]["name"] == "q"
    cluster.inject_fault(verb="get", resource="pods", status=500, count=5)
    with pytest.raises(kube.APIError) as info:
        call(cluster, lambda k: k.get(api_paths.pods_path(cluster.ns, "q")), attempts=2)
    assert info.value.status == 500 and info.value.transient


def test_outage_is_measured_until_the_server_answers() -> None:
    async def go():
        k = kube.Kube(attempts=1)
        k.connect(SimpleNamespace(server="http://127.0.0.1:9", token="t", insecure=True))  # nothing listens
        with pytest.raises(kube.APIError) as info:
            await k.get("/api/v1/namespaces/x/pods/y")
        assert info.value.status == 0
        assert k.outage_seconds() >= 0 and k.failing_since is not None
        await k.aclose()

    asyncio.run(go())


def test_proxy_variables_are_honoured_and_no_proxy_exempts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment's proxy is read once at connect (no per-request lookups), and a
    request to the API server goes through it, as with kubectl; NO_PROXY bypasses it."""
    seen: list[str] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        seen.append(head.split("\r\n")[0])
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 17\r\n"
            b'Connection: close\r\n\r\n{"kind":"proxy"}\n'
        )
        await writer.drain()
        writer.close()

    async def go(no_proxy: str, proxy_url: bool = False) -> Any:
        server = await asyncio.start_server(proxy, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9" if proxy_url else url)
        monkeypatch.setenv("NO_PROXY", no_proxy)
        k = kube.Kube(attempts=1)
        k.connect(
            SimpleNamespace(
                server="http://kube.invalid:8080", token="t", insecure=True, proxy_url=url if proxy_url else None
            )
        )
        assert isinstance(k._transport, HttpTransport)
        assert not k._transport.session.trust_env  # no per-request env lookups
        try:
            return await k.get("/api/v1/namespaces/x/pods/y")
        finally:
            await k.aclose()
            server.close()

    assert asyncio.run(go("other.invalid")) == {"kind": "proxy"}
    assert seen == ["GET http://kube.invalid:8080/api/v1/namespaces/x/pods/y HTTP/1.1"]
    with pytest.raises(kube.APIError) as info:  # exempt: straight to kube.invalid, which does not resolve
        asyncio.run(go("kube.invalid"))
    assert info.value.status == 0 and len(seen) == 1
    # The kubeconfig's proxy-url is used whatever NO_PROXY says (client-go's rule).
    assert asyncio.run(go("kube.invalid", proxy_url=True)) == {"kind": "proxy"} and len(seen) == 2
