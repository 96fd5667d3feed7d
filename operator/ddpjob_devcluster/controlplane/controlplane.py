"""A real Kubernetes control plane on loopback: etcd, kube-apiserver,
kube-controller-manager and kube-scheduler, built from pinned upstream modules
(`build.py`), each a child process with its own log, all stopped with their parent.

The flags follow kubeadm's control-plane manifests, on 127.0.0.1 with free ports
(`flags.py`): x509 client certificates for every component (`pki.py`), Node and RBAC
authorization, NodeRestriction on top of the default admission plugins (PodSecurity,
ResourceQuota, LimitRanger, ServiceAccount, ... are on by default in kube-apiserver),
ServiceAccount token signing, and the controller manager's default controllers (garbage
collector, namespace, ResourceQuota, ServiceAccount, token, node lifecycle, Job,
EndpointSlice...), with its hostpath provisioner behind a default StorageClass
(`storage.py`). This module issues the identities, starts the processes in order and
waits for each to be ready.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import ssl
import time
import urllib.request
from typing import Any

from ddpjob.local.ports import free_port
from ddpjob_devcluster.controlplane import build, flags, pki, storage
from ddpjob_devcluster.controlplane.process import Component, StartFailure

# On 2 busy cores a cold kube-apiserver needs 10-20 s for its post-start hooks
# (bootstrap RBAC, priority classes, the kubernetes Service); a minute is a fault.
API_SERVER_READY_SECONDS = 90
ETCD_READY_SECONDS = 30
CONTROLLERS_READY_SECONDS = 60
# Native gang scheduling (the Workload/PodGroup API, KEP-4671) is beta and off by default
# in 1.37: the dev cluster turns it on, in kube-apiserver, the controller manager and the
# scheduler alike, so `spec.scheduling.gang: kubernetes` runs on the real kube-scheduler's
# GangScheduling plugin. A caller's gates and API settings are added to these.
DEFAULT_FEATURE_GATES = {"GenericWorkload": True}
DEFAULT_RUNTIME_CONFIG = ("scheduling.k8s.io/v1beta1=true",)


class ControlPlane:
    """`start()` (or `with`); `stop()` stops every process, scheduler first, etcd last."""

    def __init__(
        self,
        workdir: str | pathlib.Path,
        *,
        feature_gates: dict[str, bool] | None = None,
        runtime_config: list[str] | None = None,
        scheduler_config: pathlib.Path | None = None,
        verbosity: int = 1,
        api_server_args: list[str] | None = None,
        port: int = 0,
    ):
        """api_server_args: more kube-apiserver flags (e.g. an audit log for a benchmark).
        port: the API server's (default: a free one), e.g. the one a relay publishes."""
        self.workdir = pathlib.Path(workdir)
        self.feature_gates = {**DEFAULT_FEATURE_GATES, **(feature_gates or {})}
        self.runtime_config = [*DEFAULT_RUNTIME_CONFIG, *(runtime_config or [])]
        self.scheduler_config = scheduler_config
        self.verbosity = verbosity
        self.api_server_args = list(api_server_args or [])
        self.components: list[Component] = []
        self.pki_dir = self.workdir / "pki"
        self.logs = self.workdir / "logs"
        self.authority: pki.Authority | None = None
        self.requested_port, self.port = port, 0
        self.admin_kubeconfig = self.workdir / "admin.kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca(self) -> pathlib.Path:
        return self.pki_dir / "ca.crt"

    # ---- lifecycle -------------------------------------------------------------------

    def start(self) -> ControlPlane:
        kube, etcd_bin = build.build(build.KUBERNETES), build.build(build.ETCD)
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self._pki()
            self._start_etcd(etcd_bin)
            self._start_api_server(kube)
            self._start_controllers(kube)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        serving = any(c.name == "kube-apiserver" and c.alive for c in self.components)
        made = storage.provisioned(self.admin_kubeconfig) if serving else []
        for component in reversed(self.components):
            component.stop()
        self.components = []
        storage.remove(made)  # the volumes' objects went with etcd's data

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def check_alive(self) -> None:
        """One line for the first component that has died."""
        for component in self.components:
            if not component.alive:
                raise StartFailure(
                    f"{component.name} exited with code {component.popen.returncode} "
                    f"({component.last_line()}); log: {component.log_path}"
                )

    # ---- identities ------------------------------------------------------------------

    def client_kubeconfig(
        self, name: str, common: str, org: str | None = None, namespace: str = "default"
    ) -> pathlib.Path:
        """A kubeconfig for a client certificate issued by the cluster's CA."""
        assert self.authority is not None, "start() first"
        pair = self.authority.issue(name, common, org=org)
        return pki.write_kubeconfig(
            self.workdir / f"{name}.kubeconfig", self.server, self.ca, user=common, client=pair, namespace=namespace
        )

    def node_kubeconfig(self, node: str) -> pathlib.Path:
        """A kubelet's identity: `system:node:<node>` in `system:nodes`."""
        return self.client_kubeconfig(f"node-{node}", f"system:node:{node}", "system:nodes")

    def token_kubeconfig(self, path: pathlib.Path, token: str, user: str, namespace: str = "default") -> pathlib.Path:
        return pki.write_kubeconfig(path, self.server, self.ca, user=user, token=token, namespace=namespace)

    def _pki(self) -> None:
        shutil.rmtree(self.pki_dir, ignore_errors=True)
        self.authority = pki.Authority(self.pki_dir)
        self.serving = self.authority.issue("apiserver", "kube-apiserver", server=True, hosts=pki.api_server_hosts())
        self.kubelet_client = self.authority.issue(
            "apiserver-kubelet-client", "kube-apiserver-kubelet-client", org="system:masters"
        )
        self.service_accounts = self.authority.service_account_keys()

    # ---- the processes -----------------------------------------------------------------

    def _start_etcd(self, folder: pathlib.Path) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        data = self.workdir / "etcd"
        shutil.rmtree(data, ignore_errors=True)
        etcd = Component("etcd", flags.etcd(folder, data, client, peer), self.logs / "etcd.log", ports=(client, peer))
        self.components.append(etcd)
        etcd.wait_ready(
            lambda: json.load(urllib.request.urlopen(f"{self.etcd_url}/health", timeout=2)).get("health") == "true",
            ETCD_READY_SECONDS,
            "healthy",
        )

    def _start_api_server(self, folder: pathlib.Path) -> None:
        self.port = self.requested_port or free_port()
        args = flags.api_server(
            folder,
            etcd_url=self.etcd_url,
            port=self.port,
            ca=self.ca,
            serving=self.serving,
            kubelet_client=self.kubelet_client,
            service_accounts=self.service_accounts,
            verbosity=self.verbosity,
            gates=self.feature_gates,
            runtime_config=self.runtime_config,
            extra=self.api_server_args,
        )
        api = Component(
            "kube-apiserver", args, self.logs / "kube-apiserver.log", ports=(self.port,), kill_with_parent=True
        )
        self.components.append(api)
        assert self.authority is not None, "_pki() first"
        pki.write_kubeconfig(
            self.admin_kubeconfig,
            self.server,
            self.ca,
            user="ddpjob-admin",
            client=self.authority.issue("admin", "ddpjob-admin", org="system:masters"),
        )
        api.wait_ready(lambda: self._get("/readyz") == "ok", API_SERVER_READY_SECONDS, "ready (/readyz)")

    def _start_controllers(self, folder: pathlib.Path) -> None:
        kcm_config = self.client_kubeconfig("controller-manager", "system:kube-controller-manager")
        kcm_args = flags.controller_manager(
            folder,
            kubeconfig=kcm_config,
            ca=self.ca,
            ca_key=self.pki_dir / "ca.key",
            service_account_key=self.service_accounts.key,
            verbosity=self.verbosity,
            gates=self.feature_gates,
        )
        kcm = Component("kube-controller-manager", kcm_args, self.logs / "kube-controller-manager.log")
        self.components.append(kcm)
        scheduler_config = self.client_kubeconfig("scheduler", "system:kube-scheduler")
        scheduler_args = flags.scheduler(
            folder,
            kubeconfig=scheduler_config,
            verbosity=self.verbosity,
            gates=self.feature_gates,
            config=self.scheduler_config,
        )
        scheduler = Component("kube-scheduler", scheduler_args, self.logs / "kube-scheduler.log")
        self.components.append(scheduler)
        # Ready for Pods once the ServiceAccount controller has made `default`'s account:
        # the ServiceAccount admission plugin refuses Pods until then.
        kcm.wait_ready(
            lambda: self._get("/api/v1/namespaces/default/serviceaccounts/default") is not None,
            CONTROLLERS_READY_SECONDS,
            "running (no 'default' ServiceAccount made)",
        )
        storage.install(self.admin_kubeconfig)

    # ---- plain HTTPS as the admin -------------------------------------------------------

    def _context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca))
        admin = self.pki_dir
        context.load_cert_chain(str(admin / "admin.crt"), str(admin / "admin.key"))
        return context

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.server}{path}", context=self._context(), timeout=5) as response:
            body = response.read().decode()
        return body if not body.startswith("{") else json.loads(body)


def wait(predicate: Any, timeout: float, what: str) -> Any:
    deadline, delay = time.monotonic() + timeout, 0.05
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout:.0f} s")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)
