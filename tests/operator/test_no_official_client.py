"""The operator never needs a generated Kubernetes client, so its image ships none: it
sends its requests on aiohttp (operator/transport.py); the `operator` extra has neither
the official `kubernetes` client nor `kubernetes_asyncio`, and the `cli` extra brings the
official client to the `ddpjob` command's cluster commands and the Python client, through
`ddpjob.cluster`. Shown three ways: no module but the CLI's and the cluster layer's
imports it; the operator's modules import, read credentials, build their transport and
check a job's template in a Python where it cannot be imported; and the packaging
installs it only with the `cli` extra."""

from __future__ import annotations

import ast
import os
import pathlib
import re
import subprocess
import sys
import textwrap
import tomllib

from ddpjob.operator import connection

ROOT = pathlib.Path(__file__).resolve().parents[2]
DDPJOB = ROOT / "operator" / "ddpjob"
# The official client's users (the `cli` extra): the cluster commands, and the layer for
# talking to a cluster that they and the Python client share.
CLIENT_SIDE = (DDPJOB / "cli", DDPJOB / "cluster")


def official_imports(source: str) -> list[int]:
    """The lines that import `kubernetes` (not `kubernetes_asyncio`), at any depth."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        else:
            continue
        if any(n == "kubernetes" or n.startswith("kubernetes.") for n in names):
            lines.append(node.lineno)
    return lines


def test_the_finder_sees_every_form() -> None:
    assert official_imports("import kubernetes\nimport kubernetes_asyncio\n") == [1]
    assert official_imports("def f():\n    from kubernetes.client import V1Pod\n") == [2]
    assert official_imports("import kubernetes.client as client\nfrom kubernetes_asyncio import client\n") == [1]


def test_no_module_outside_the_cli_imports_the_official_client() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{line}"
        for p in sorted(DDPJOB.rglob("*.py"))
        if not any(side in p.parents for side in CLIENT_SIDE)
        for line in official_imports(p.read_text())
    ]
    assert found == []


BLOCKED = """
import asyncio, importlib.abc, sys

class NoOfficialClient(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("kubernetes", "kubernetes_asyncio"):
            raise ImportError(f"{name}: not in the operator's image")
        return None

sys.meta_path.insert(0, NoOfficialClient())
import ddpjob.operator.main, ddpjob.operator.handlers
from ddpjob.api import spec
from ddpjob.operator import connection, transport

class Info:
    server, token, scheme, insecure = "https://10.0.0.1:6443/", "t0k3n", "Bearer", False

creds = connection.configuration(Info(), pool_size=4)
assert creds.host == "https://10.0.0.1:6443" and creds.api_key == {"BearerToken": "t0k3n"}, creds

async def build():
    t = transport.HttpTransport(creds, 4)
    await t.aclose()

asyncio.run(build())
job = {"apiVersion": "ddpjob.io/v1alpha1", "kind": "DDPJob", "metadata": {"name": "j"},
       "spec": {"nodes": 1, "image": "x", "template": {"spec": {"containers": {"name": "trainer"}}}}}
errors = [str(e) for e in spec.validate(job)]
assert any("spec.template.spec.containers" in e and "must be a list" in e for e in errors), errors

# The login: no official client to ask, no service account mounted here: kopf's own
# kubeconfig reader (KUBECONFIG, set by the test), and the operator's client is built from it.
import kopf, logging
memo = kopf.Memo()
info = asyncio.run(ddpjob.operator.handlers.login(memo=memo, logger=logging.getLogger("t"),
                                                  settings=kopf.OperatorSettings()))
assert info.server == "https://10.0.0.2:6443" and info.token == "from-kubeconfig", info
assert memo.kube is not None
assert not {"kubernetes", "kubernetes_asyncio"} & set(sys.modules)
print("ok")
"""
KUBECONFIG = """
apiVersion: v1
kind: Config
current-context: c
contexts: [{name: c, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://10.0.0.2:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: from-kubeconfig}}]
"""


def test_the_operator_runs_where_the_official_client_cannot_be_imported(tmp_path: pathlib.Path) -> None:
    """As in the operator's image (no generated client at all): the operator's modules
    load, its credentials and transport are made, a template's types are still checked (from the data in
    ddpjob/api/template_types.json, not a client's models), and it logs in."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_SERVICE_")}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(BLOCKED)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**env, "KUBECONFIG": str(kubeconfig)},
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr


def test_only_the_cli_extra_installs_the_official_client() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]

    def names(extra: str) -> set[str]:
        return {re.split(r"[<>=!~\[ ;]", r, maxsplit=1)[0].lower().replace("_", "-") for r in extras[extra]}

    assert not {"kubernetes", "kubernetes-asyncio"} & names("operator") and "aiohttp" in names("operator")
    assert "kubernetes" in names("cli")
    # The image installs the operator extra alone: its dependencies' layer names that
    # extra only, and ddpjob's wheel goes in without its own (--no-deps).
    dockerfile = (ROOT / "Dockerfile").read_text()
    stage = dockerfile[dockerfile.index("AS operator-venv") : dockerfile.index("AS operator\n")]
    assert re.findall(r'"\$DEPENDENCIES" (\S+)', stage) == ["operator"]
    assert re.findall(r"pip install [^\n]*ddpjob-\*\.whl", stage) == [
        "pip install --no-cache-dir --no-deps /wheels/ddpjob-*.whl"
    ]


def test_the_in_cluster_server_is_the_environments_address() -> None:
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert connection.in_cluster_server(env) == "https://10.96.0.1:443"
    assert connection.in_cluster_server({**env, "KUBERNETES_SERVICE_HOST": "fd00::1"}) == "https://[fd00::1]:443"
    assert connection.in_cluster_server({}) is None


def test_the_proxy_is_the_environments_for_the_servers_scheme(monkeypatch) -> None:
    class Info:
        server = "https://api.example.test:6443"

    for name in (
        "https_proxy",
        "HTTPS_PROXY",
        "http_proxy",
        "HTTP_PROXY",
        "all_proxy",
        "ALL_PROXY",
        "no_proxy",
        "NO_PROXY",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.test:3128")
    monkeypatch.setenv("HTTP_PROXY", "http://wrong.test:1")
    monkeypatch.setenv("NO_PROXY", "internal.test")
    creds = connection.configuration(Info(), pool_size=1)
    assert (creds.proxy, creds.no_proxy) == ("http://proxy.test:3128", "internal.test")
    assert connection.direct_or_proxy(creds) == "http://proxy.test:3128"


def test_the_service_account_login_takes_the_servers_address_from_the_environment(monkeypatch) -> None:
    """In a Pod: kopf's reader of the mounted token names kubernetes.default.svc (a DNS
    lookup); the operator goes to the address the kubelet put in its environment."""
    import kopf

    from ddpjob.operator import handlers

    mounted = kopf.ConnectionInfo(server="https://kubernetes.default.svc", token="t")
    monkeypatch.setattr(kopf, "login_with_service_account", lambda **_: mounted)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    info = handlers._service_account(logger=None)
    assert info is not None
    assert info.server == "https://10.96.0.1:443" and info.token == "t"
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    assert handlers._service_account(logger=None) is mounted
