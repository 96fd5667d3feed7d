"""The operator's API credentials, as plain data for its transport.

kopf's login handlers produce a `kopf.ConnectionInfo` (from a kubeconfig, the in-cluster
service account, or a test's control plane); `configuration(info)` turns the same info into
the `Credentials` that `kube.Kube`'s transport (`transport.py`, on aiohttp)
uses, so kopf's watches and the operator's writes always speak to the same server as
the same user. No client is imported here: the fields are those of the generated
clients' `Configuration` (which the transport fills from them), and the proxy is taken
from the environment once, as the official client's `Configuration` takes it.

Only attribute names of `ConnectionInfo` are read (no kopf import): server, ca_path,
ca_data, insecure, scheme, token, username, password, certificate_path/_data,
private_key_path/_data, proxy_url.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import os
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_temp_files: list[str] = []


def _remove_temp_files() -> None:
    for path in _temp_files:
        with contextlib.suppress(OSError):
            os.unlink(path)


atexit.register(_remove_temp_files)


def _as_file(data: str | bytes) -> str:
    """The official client wants a file path for certificates; kubeconfigs may inline them."""
    raw = data.encode() if isinstance(data, str) else data
    if b"-----BEGIN" not in raw:  # kubeconfig's *-data fields are base64 of the PEM
        raw = base64.b64decode(raw)
    fd, path = tempfile.mkstemp(prefix="ddpjob-cert-", suffix=".pem")
    with os.fdopen(fd, "wb") as f:
        f.write(raw)
    _temp_files.append(path)
    return path


@dataclass
class Credentials:
    """Where the API server is and who the operator is there: the generated clients'
    `Configuration` fields of the same names."""

    host: str = ""
    verify_ssl: bool = True
    ssl_ca_cert: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    api_key: dict[str, str] = field(default_factory=dict)
    api_key_prefix: dict[str, str] = field(default_factory=dict)
    username: str | None = None
    password: str | None = None
    proxy: str | None = None
    no_proxy: str | None = None
    connection_pool_maxsize: int = 1
    retries: int | None = None


def configuration(info: Any, *, pool_size: int) -> Credentials:
    """The credentials of a kopf ConnectionInfo (or anything with its attributes)."""
    config = Credentials()
    config.host = str(info.server).rstrip("/")
    # The environment's proxy for the server's scheme (else "all") and NO_PROXY, read once
    # here, as the official client's Configuration reads them (urllib3 reads none).
    proxies = urllib.request.getproxies()
    config.proxy = proxies.get(urllib.parse.urlsplit(config.host).scheme) or proxies.get("all")
    config.no_proxy = proxies.get("no")
    config.verify_ssl = not bool(getattr(info, "insecure", False))
    ca_path, ca_data = getattr(info, "ca_path", None), getattr(info, "ca_data", None)
    if ca_path:
        config.ssl_ca_cert = os.fspath(ca_path)
    elif ca_data:
        config.ssl_ca_cert = _as_file(ca_data)
    for attr, path_name, data_name in (
        ("cert_file", "certificate_path", "certificate_data"),
        ("key_file", "private_key_path", "private_key_data"),
    ):
        path, data = getattr(info, path_name, None), getattr(info, data_name, None)
        if path:
            setattr(config, attr, os.fspath(path))
        elif data:
            setattr(config, attr, _as_file(data))
    token = getattr(info, "token", None)
    if token:
        # "BearerToken" is the auth setting's own name in the generated clients'
        # Configuration (the transport and benchmarks/kube_threads.py read it; a token
        # under the official client's "authorization" alias alone once reached a real API
        # server as system:anonymous).
        config.api_key = {"BearerToken": token}
        config.api_key_prefix = {"BearerToken": getattr(info, "scheme", None) or "Bearer"}
    elif getattr(info, "username", None):
        config.username, config.password = info.username, getattr(info, "password", None) or ""
    if getattr(info, "proxy_url", None):
        # The kubeconfig's proxy-url is used for its server whatever NO_PROXY says (client-go).
        config.proxy, config.no_proxy = info.proxy_url, None
    # One pooled connection per request in flight (the synchronous client's urllib3, in
    # benchmarks/kube_threads.py, otherwise opens and drops extra connections under load).
    config.connection_pool_maxsize = pool_size
    # Retries are kube.Kube's (typed, with backoff); urllib3 keeps only its retry of a
    # request whose reused keep-alive connection the server had closed.
    config.retries = 1
    return config


def in_cluster_server(environ: Mapping[str, str]) -> str | None:
    """The API server's URL inside a Pod, from the environment the kubelet sets (as
    client-go's rest.InClusterConfig builds it: an IPv6 host in brackets), or None."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        return None
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"


def direct_or_proxy(config: Credentials) -> str | None:
    """The proxy for the API server: the kubeconfig's proxy-url, else HTTPS_PROXY /
    HTTP_PROXY (read by `configuration`), unless NO_PROXY exempts the server's host
    (urllib's rules, as the official client applies them)."""
    if not config.proxy:
        return None
    host = urllib.parse.urlsplit(config.host).hostname or ""
    no_proxy = config.no_proxy
    # proxy_bypass_environment is public in urllib.request (urlopen uses it) but absent from
    # typeshed: hence the ignore
    if no_proxy and urllib.request.proxy_bypass_environment(host, {"no": no_proxy}):  # type: ignore[attr-defined]
        return None
    return config.proxy
