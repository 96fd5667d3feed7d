"""The operator's `kube.Kube` on the synchronous official client in a thread pool, the
alternative to `kubernetes_asyncio` that docs/benchmarks.md compares
(`operator_scale.py --client threads`). `install()` makes `Kube.connect` build this
transport; everything else (retries, typed errors, the controller) is unchanged, so the
benchmark compares the two HTTP clients alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import kubernetes

from ddpjob.operator import connection, kube

DEFAULT_TIMEOUT = kube.DEFAULT_TIMEOUT


class ClientTransport:
    """The official client's ApiClient in a thread pool of `workers` threads."""

    def __init__(
        self, config: kubernetes.client.Configuration, workers: int, timeout: tuple[float, float] = DEFAULT_TIMEOUT
    ):
        self.api = kubernetes.client.ApiClient(config)
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kube")
        self.timeout = timeout

    async def request(
        self, method: str, path: str, body: Any, headers: dict[str, str]
    ) -> tuple[int, bytes, Mapping[str, str]]:
        return await asyncio.get_running_loop().run_in_executor(self.pool, self._request, method, path, body, headers)

    def _request(
        self, method: str, path: str, body: Any, headers: dict[str, str]
    ) -> tuple[int, bytes, Mapping[str, str]]:
        config = self.api.configuration
        headers = {"Accept": "application/json", **headers}
        if body is not None:
            headers.setdefault("Content-Type", "application/json")
        if config.username and "authorization" not in config.api_key:
            headers["Authorization"] = config.get_basic_auth_token()
        # param_serialize adds the auth headers and the host; the body goes as-is
        # (no model serialization of a plain dict).
        _, url, headers, _, _ = self.api.param_serialize(
            method, path, header_params=headers, auth_settings=["BearerToken"]
        )
        response = self.api.call_api(method, url, header_params=headers, body=body, _request_timeout=self.timeout)
        return response.status, response.read(), response.headers

    async def aclose(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.api.close()


def client_configuration(creds: connection.Credentials) -> kubernetes.client.Configuration:
    """The official client's Configuration of the operator's credentials (same field names)."""
    config = kubernetes.client.Configuration()
    for name in (
        "host",
        "verify_ssl",
        "ssl_ca_cert",
        "cert_file",
        "key_file",
        "username",
        "password",
        "connection_pool_maxsize",
        "retries",
    ):
        setattr(config, name, getattr(creds, name))
    config.api_key, config.api_key_prefix = dict(creds.api_key), dict(creds.api_key_prefix)
    config.proxy, config.no_proxy = connection.direct_or_proxy(creds), None
    return config


def install() -> None:
    def connect(self: kube.Kube, info: Any) -> None:
        config = client_configuration(connection.configuration(info, pool_size=self.max_in_flight))
        self.use(ClientTransport(config, self.max_in_flight))

    kube.Kube.connect = connect  # type: ignore[method-assign]
