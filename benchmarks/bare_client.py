"""The ceiling a benchmark compares the operator with: the same Pods created by a bare
client in a process of its own (kubernetes_asyncio, 64 requests in flight: the
operator's client and limit). A helper of the benchmark scripts beside it (no
measurement of its own: `make bench` running it does nothing)."""

from __future__ import annotations

from typing import Any

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
