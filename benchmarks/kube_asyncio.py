"""The operator's `kube.Kube` on `kubernetes_asyncio` instead of the official client,
for the comparison in docs/benchmarks.md (`operator_scale.py --client asyncio`).

Not part of the product: `kubernetes_asyncio` is not a dependency. `install()` makes
`Kube.connect` build this transport; everything else (retries, typed errors, the
controller) is unchanged, so the benchmark compares the HTTP clients alone.
"""
from __future__ import annotations

import json
from typing import Any, Mapping

import kubernetes_asyncio
from kubernetes_asyncio.client.exceptions import ApiException

from ddpjob.operator import connection, kube


class AsyncioTransport:
    def __init__(self, info: Any, pool_size: int):
        sync = connection.configuration(info, pool_size=pool_size)
        config = kubernetes_asyncio.client.Configuration()
        config.host, config.verify_ssl = sync.host, sync.verify_ssl
        config.ssl_ca_cert, config.cert_file, config.key_file = sync.ssl_ca_cert, sync.cert_file, sync.key_file
        config.api_key, config.api_key_prefix = dict(sync.api_key), dict(sync.api_key_prefix)
        config.connection_pool_maxsize = pool_size
        self.api = kubernetes_asyncio.client.ApiClient(config)

    async def request(self, method: str, path: str, body: Any, headers: dict[str, str]) -> tuple[int, bytes, Mapping[str, str]]:
        headers = {"Accept": "application/json", **headers}
        if body is not None:
            headers.setdefault("Content-Type", "application/json")
        try:
            response = await self.api.call_api(path, method, header_params=headers, body=body,
                                               auth_settings=["BearerToken"], _preload_content=False,
                                               _request_timeout=60)
        except ApiException as exc:
            data = exc.body if isinstance(exc.body, (bytes, str)) else json.dumps(exc.body or {})
            return exc.status, data.encode() if isinstance(data, str) else data, exc.headers or {}
        response = response[0] if isinstance(response, tuple) else response
        data = await response.read()
        return response.status, data, response.headers

    def close(self) -> None:
        pass  # the session closes with the process; ApiClient.close() is a coroutine


def install() -> None:
    def connect(self: kube.Kube, info: Any) -> None:
        self.use(AsyncioTransport(info, self.max_in_flight))
    kube.Kube.connect = connect  # type: ignore[method-assign]
