"""The ceiling a benchmark compares the operator with: the same Pods created by a bare
client in a process of its own (kubernetes_asyncio, 64 requests in flight: the
operator's client and limit), on the emulator (CEILING_CLIENT) or on a real API server
with its TLS identity (CEILING_CLIENT_REAL). A helper of the benchmark scripts beside it
(no measurement of its own: `make bench` running it does nothing)."""

from __future__ import annotations

from typing import Any

import kubernetes

from ddpjob.api import spec
from ddpjob.render import objects


def ceiling_pod(job: dict[str, Any], namespace: str) -> dict[str, Any]:
    """A Pod as the operator renders it for `job` (same size and fields, so the server does
    the same work per create), without the job's label and owner: the operator must not
    take these Pods for a job's."""
    body = {**job, "metadata": {"name": "ceiling", "namespace": namespace, "uid": "ceiling"}}
    pod = objects.render_pod(spec.parse_job(body), 0)
    pod["metadata"]["labels"] = {"bench": "ceiling"}
    pod["metadata"].pop("ownerReferences", None)
    return pod


CEILING_CLIENT = """
import asyncio, json, sys, time
import kubernetes_asyncio.client as k

pod = json.load(sys.stdin)

async def main(host, ns, count):
    config = k.Configuration(host=host)
    config.connection_pool_maxsize = 64
    config.api_key = {"authorization": "emulator-token"}
    config.api_key_prefix = {"authorization": "Bearer"}
    class PlainJSON(k.ApiClient):  # plain dict bodies, as the operator sends (kube.py)
        def sanitize_for_serialization(self, obj):
            return obj if isinstance(obj, dict) else super().sanitize_for_serialization(obj)

    async with PlainJSON(config) as api:
        core, slots = k.CoreV1Api(api), asyncio.Semaphore(64)

        async def create(i):
            body = {**pod, "metadata": {**pod["metadata"], "name": f"ceiling-{i}"}}
            async with slots:
                await core.create_namespaced_pod(ns, body, _preload_content=False)
        await create(count)  # the connection and the first request, not timed
        start = time.perf_counter()
        await asyncio.gather(*(create(i) for i in range(count)))
        print(time.perf_counter() - start)

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


def api_config(api: kubernetes.client.ApiClient) -> dict[str, Any]:
    c = api.configuration
    return {
        "host": c.host,
        "ca": c.ssl_ca_cert,
        "cert": c.cert_file,
        "key": c.key_file,
        "verify": c.verify_ssl,
        "token": (c.api_key or {}).get("authorization") or (c.api_key or {}).get("BearerToken"),
    }


# The bare client: operator_scale's ceiling client, with the server's TLS identity.
CEILING_CLIENT_REAL = """
import asyncio, json, sys, time
import kubernetes_asyncio
conf, ns, count = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
pod = json.loads(sys.stdin.read())
async def main():
    c = kubernetes_asyncio.client.Configuration()
    c.host, c.verify_ssl = conf["host"], conf["verify"]
    c.ssl_ca_cert, c.cert_file, c.key_file = conf["ca"], conf["cert"], conf["key"]
    if conf["token"]:
        c.api_key = {"BearerToken": conf["token"]}; c.api_key_prefix = {"BearerToken": "Bearer"}
    c.connection_pool_maxsize = 64
    async with kubernetes_asyncio.client.ApiClient(c) as api:
        core = kubernetes_asyncio.client.CoreV1Api(api)
        limit = asyncio.Semaphore(64)
        async def one(i):
            async with limit:
                await core.create_namespaced_pod(ns, {**pod, "metadata": {**pod["metadata"], "name": f"ceiling-{i}"}})
        start = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(count)))
        print(time.perf_counter() - start)
asyncio.run(main())
"""
