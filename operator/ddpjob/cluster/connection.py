"""A connection to a cluster: the user's kubeconfig, like kubectl reads it.

`KUBECONFIG` (one or several files separated by the path separator) or ~/.kube/config,
`--kubeconfig FILE`, `--context NAME`, and the namespace from `-n/--namespace`, else the
context's namespace, else `default`. Inside a Pod with no kubeconfig, the service account.

Every failure becomes a `ClusterError` with a one-line message: no cluster configured,
cluster unreachable, the DDPJob CRD not installed, forbidden, not found. The rest of
this package raises nothing else (`explained` turns an API failure into one).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ddpjob.api import names

# `kubernetes` is imported inside the functions: `ddpjob validate|render|run` must work
# with the core install alone (no operator extra), and they build the same parser.

CRD_HINT = "kubectl apply -f manifests/crd/ddpjobs.ddpjob.io.yaml, or install the Helm chart"


class ClusterError(RuntimeError):
    """A one-line error for the user (a RuntimeError, as Kubeflow Trainer's client raises
    for a failed call); `code` is the process exit status. Where the API
    server answered, `status` is its HTTP status and `detail` its own words (a conflict's
    managers, read by `ddpjob submit`)."""

    def __init__(self, message: str, code: int = 1, status: int | None = None, detail: str = ""):
        super().__init__(message)
        self.code = code
        self.status = status
        self.detail = detail


@dataclass
class Connection:
    api: Any  # kubernetes.client.ApiClient
    namespace: str
    server: str

    @property
    def custom(self) -> Any:
        import kubernetes

        return kubernetes.client.CustomObjectsApi(self.api)

    @property
    def core(self) -> Any:
        import kubernetes

        return kubernetes.client.CoreV1Api(self.api)


def connect(kubeconfig: str | None = None, context: str | None = None, namespace: str | None = None) -> Connection:
    try:
        import kubernetes
    except ImportError:
        raise ClusterError("the cluster commands need the kubernetes client: pip install 'ddpjob[cli]'") from None
    config = kubernetes.client.Configuration()
    files = kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    context_namespace = None
    present = [f for f in files.split(os.pathsep) if f and os.path.exists(os.path.expanduser(f))]
    if present:
        try:
            kubernetes.config.load_kube_config(
                config_file=os.pathsep.join(present), context=context, client_configuration=config, persist_config=False
            )
            _, active = kubernetes.config.list_kube_config_contexts(config_file=os.pathsep.join(present))
            if context:
                contexts, _ = kubernetes.config.list_kube_config_contexts(config_file=os.pathsep.join(present))
                active = next((c for c in contexts if c["name"] == context), active)
            context_namespace = (active.get("context") or {}).get("namespace")
        except kubernetes.config.ConfigException as exc:
            raise ClusterError(f"no cluster: {' '.join(str(exc).split())}") from None
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        try:
            kubernetes.config.load_incluster_config(client_configuration=config)
        except kubernetes.config.ConfigException as exc:
            raise ClusterError(f"no cluster: {exc}") from None
        try:
            with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
                context_namespace = f.read().strip()
        except OSError:
            pass
    else:
        raise ClusterError(f"no cluster: no kubeconfig at {files} (set KUBECONFIG or pass --kubeconfig)")
    config.retries = 1
    return Connection(kubernetes.client.ApiClient(config), namespace or context_namespace or "default", config.host)


def status_of(exc: Any) -> dict[str, Any]:
    try:
        body = json.loads(exc.body) if exc.body else {}
    except (TypeError, ValueError):
        body = {}
    return body if isinstance(body, dict) else {}


def explain(exc: BaseException, conn: Connection | None, what: str = "") -> ClusterError:
    """The one line a user sees for an API failure. `what`: the object asked for."""
    import kubernetes
    import urllib3

    if isinstance(exc, ClusterError):
        return exc
    if isinstance(exc, kubernetes.client.ApiException):
        status = status_of(exc)
        message = " ".join(str(status.get("message") or exc.reason or "").split())

        def answered(line: str) -> ClusterError:  # the server's status and words kept (a conflict's managers)
            return ClusterError(line, status=exc.status or None, detail=message)

        if exc.status == 404:
            details = status.get("details") or {}
            if what and details.get("name"):
                return answered(f"not found: {what} in namespace {conn.namespace if conn else '?'}")
            return answered(
                f"the DDPJob CRD ({names.PLURAL}.{names.GROUP}) is not installed in this cluster: {CRD_HINT}"
            )
        if exc.status == 403:
            return answered(f"forbidden: {message}")
        if exc.status == 401:
            return answered(f"unauthorized: the kubeconfig's credentials were refused ({message})")
        if exc.status == 0:
            return ClusterError(f"cannot reach the cluster at {conn.server if conn else '?'}: {message}")
        return answered(f"the API server refused: {exc.status} {status.get('reason') or exc.reason}: {message}")
    if isinstance(exc, (urllib3.exceptions.HTTPError, OSError)):
        reason = getattr(exc, "reason", None) or exc
        return ClusterError(
            f"cannot reach the cluster at {conn.server if conn else '?'}: {' '.join(str(reason).split())[:200]}"
        )
    return ClusterError(str(exc))


@contextlib.contextmanager
def explained(conn: Connection | None, what: str = "") -> Iterator[None]:
    """Run the block; any failure in it leaves as the `ClusterError` that says it."""
    try:
        yield
    except ClusterError:
        raise
    except Exception as exc:  # an API or connection failure: its one line, the cause kept
        raise explain(exc, conn, what) from exc
