"""How the operator's requests travel: one HTTP request on aiohttp (kopf's own HTTP
library), with the credentials of `connection.Credentials`.

`kube.Kube` retries, types errors and paces requests; this module only sends one and
returns the answer (status, body bytes, headers), raising only when there is none. It
does what `kubernetes_asyncio`'s REST layer did for the operator (a TLS context from the
CA, client certificate and key; the bearer token or basic auth; one pooled connector; the
proxy settled once; a total timeout per request) without its 48 MB of generated API
classes and models, which the operator never used: it sends and reads plain JSON.
"""

from __future__ import annotations

import base64
import json
import ssl
from collections.abc import Mapping
from typing import Any, Protocol

import aiohttp

from ddpjob import version
from ddpjob.operator import connection

DEFAULT_TIMEOUT = (5.0, 60.0)  # (connect, read) seconds
USER_AGENT = f"ddpjob-operator/{version.__version__}"


class Transport(Protocol):
    """One HTTP request: (status, body bytes, headers); raises only when there is no answer."""

    async def request(
        self, method: str, path: str, body: Any, headers: dict[str, str]
    ) -> tuple[int, bytes, Mapping[str, str]]: ...

    async def aclose(self) -> None: ...


def tls_context(config: connection.Credentials) -> ssl.SSLContext:
    """The server's CA (else the system's), the client's certificate and key, and no
    verification at all only where the kubeconfig says insecure-skip-tls-verify."""
    context = ssl.create_default_context(cafile=config.ssl_ca_cert)
    if config.cert_file:
        context.load_cert_chain(config.cert_file, keyfile=config.key_file)
    if not config.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def auth_header(config: connection.Credentials) -> str | None:
    """The Authorization header: the bearer token ("BearerToken", the clients' name for
    it), else basic auth from a username, else none (a client certificate)."""
    token = config.api_key.get("BearerToken")
    if token:
        prefix = config.api_key_prefix.get("BearerToken")
        return f"{prefix} {token}" if prefix else token
    if config.username:
        pair = f"{config.username}:{config.password or ''}".encode()
        return "Basic " + base64.b64encode(pair).decode()
    return None


class HttpTransport:
    """One aiohttp session on a pooled connector, so requests wait on the event loop, not
    in threads (see kube.py's docstring)."""

    def __init__(self, config: connection.Credentials, pool_size: int, timeout: float = DEFAULT_TIMEOUT[1]):
        self.host = config.host
        self.proxy = connection.direct_or_proxy(config)
        self.headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        authorization = auth_header(config)
        if authorization:
            self.headers["Authorization"] = authorization
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        # trust_env=False: aiohttp would look up the proxy variables and ~/.netrc in a
        # worker thread on every request (two thread hops per Pod create); the proxy was
        # settled once (connection.direct_or_proxy). The read buffer holds the largest
        # object etcd stores (1.5 MiB by default) in one read.
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=pool_size, ssl=tls_context(config)),
            trust_env=False,
            read_bufsize=2**21,
        )

    async def request(
        self, method: str, path: str, body: Any, headers: dict[str, str]
    ) -> tuple[int, bytes, Mapping[str, str]]:
        sent = {**self.headers, **headers}
        data = None
        if body is not None:
            sent.setdefault("Content-Type", "application/json")
            data = body if isinstance(body, bytes) else json.dumps(body)
        async with self.session.request(
            method, self.host + path, data=data, headers=sent, proxy=self.proxy, timeout=self.timeout
        ) as response:
            return response.status, await response.read(), response.headers

    async def aclose(self) -> None:
        await self.session.close()
