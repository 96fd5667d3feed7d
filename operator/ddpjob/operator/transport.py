"""How the operator's requests travel: one HTTP request through the official async client.

`kube.Kube` retries, types errors and paces requests; this module only sends one and
returns the answer (status, body bytes, headers), raising only when there is none.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

import aiohttp
import kubernetes_asyncio

from ddpjob.operator import connection

DEFAULT_TIMEOUT = (5.0, 60.0)  # (connect, read) seconds


class Transport(Protocol):
    """One HTTP request: (status, body bytes, headers); raises only when there is no answer."""

    async def request(
        self, method: str, path: str, body: Any, headers: dict[str, str]
    ) -> tuple[int, bytes, Mapping[str, str]]: ...

    async def aclose(self) -> None: ...


class AsyncioTransport:
    """kubernetes_asyncio's ApiClient: the official client's generated code on aiohttp,
    so requests wait on the event loop, not in threads (see the module docstring)."""

    def __init__(self, config: connection.Credentials, pool_size: int, timeout: float = DEFAULT_TIMEOUT[1]):
        aconfig = kubernetes_asyncio.client.Configuration()
        aconfig.host, aconfig.verify_ssl = config.host, config.verify_ssl
        aconfig.ssl_ca_cert, aconfig.cert_file, aconfig.key_file = config.ssl_ca_cert, config.cert_file, config.key_file
        aconfig.api_key, aconfig.api_key_prefix = dict(config.api_key), dict(config.api_key_prefix)
        aconfig.username, aconfig.password = config.username, config.password
        aconfig.proxy = connection.direct_or_proxy(config)
        aconfig.connection_pool_maxsize = pool_size
        self.api = _PlainJSONApiClient(aconfig)
        self.timeout = timeout
        rest = self.api.rest_client
        # The generated client's session has trust_env=True: aiohttp then looks up the
        # proxy variables and ~/.netrc in a worker thread on every request (two thread
        # hops per Pod create). connection.configuration has already read the proxy
        # variables once (connection.direct_or_proxy), so the session does without.
        session, rest.pool_manager = (
            rest.pool_manager,
            aiohttp.ClientSession(connector=rest.pool_manager.connector, trust_env=False, read_bufsize=2**21),
        )
        session.detach()  # the connector now belongs to the new session

    async def request(
        self, method: str, path: str, body: Any, headers: dict[str, str]
    ) -> tuple[int, bytes, Mapping[str, str]]:
        headers = {"Accept": "application/json", **headers}
        if body is not None:
            headers.setdefault("Content-Type", "application/json")
        if self.api.configuration.username and "BearerToken" not in self.api.configuration.api_key:
            headers["Authorization"] = self.api.configuration.get_basic_auth_token()
        try:
            response = await self.api.call_api(
                path,
                method,
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=self.timeout,
            )
        except kubernetes_asyncio.client.ApiException as exc:  # non-2xx answers
            data = exc.body if isinstance(exc.body, (bytes, str)) else json.dumps(exc.body or {})
            return exc.status, data.encode() if isinstance(data, str) else data, exc.headers or {}
        response = response[0] if isinstance(response, tuple) else response
        return response.status, await response.read(), response.headers

    async def aclose(self) -> None:
        await self.api.close()


class _PlainJSONApiClient(kubernetes_asyncio.client.ApiClient):
    """The operator sends plain JSON data (rendered objects and patches), never client
    models: the generated client's recursive walk that turns models into dicts cost
    about 0.4 ms per Pod create, and json.dumps would reject anything it was needed for."""

    def sanitize_for_serialization(self, obj: Any) -> Any:
        if isinstance(obj, dict):
            return obj
        return super().sanitize_for_serialization(obj)
