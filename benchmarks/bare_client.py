"""The ceiling a benchmark compares the operator with: the same Pods created by a bare
client in a process of its own (kubernetes_asyncio, 64 requests in flight: the
operator's client and limit), on the API server with the caller's TLS identity
(`CEILING_CLIENT`, its configuration from `api_config`). A helper of the benchmark
scripts beside it (no measurement of its own: `make bench` running it does nothing)."""

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


# argv: api_config's JSON, the namespace, how many Pods; stdin: the Pod; prints the seconds.
CEILING_CLIENT = """
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
