"""The control plane's command lines: etcd, kube-apiserver, kube-controller-manager and
kube-scheduler with the flags of kubeadm's control-plane manifests, on 127.0.0.1.

x509 client certificates for every component (`pki.py`), Node and RBAC authorization,
NodeRestriction on top of the default admission plugins, ServiceAccount token signing,
the controller manager's default controllers with its hostpath provisioner (`storage.py`).
Off, as a test cluster does not need them: leader election, the controllers' and the
scheduler's own serving ports, profiling, etcd's fsync (its data dies with the cluster).
Pure: `controlplane.py` supplies the paths, ports and certificates and runs the processes.
"""

from __future__ import annotations

import pathlib
from collections.abc import Mapping, Sequence

from ddpjob_devcluster.controlplane import pki, storage


def feature_gates(gates: Mapping[str, bool]) -> list[str]:
    """`--feature-gates=A=true,B=false` (sorted), or nothing for no gates."""
    if not gates:
        return []
    return ["--feature-gates=" + ",".join(f"{k}={str(v).lower()}" for k, v in sorted(gates.items()))]


def etcd(folder: pathlib.Path, data: pathlib.Path, client: int, peer: int) -> list[str]:
    url, peer_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
    return [
        str(folder / "etcd"),
        "--name=default",
        f"--data-dir={data}",
        f"--listen-client-urls={url}",
        f"--advertise-client-urls={url}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=default={peer_url}",
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


def api_server(
    folder: pathlib.Path,
    *,
    etcd_url: str,
    port: int,
    ca: pathlib.Path,
    serving: pki.Pair,
    kubelet_client: pki.Pair,
    service_accounts: pki.Pair,
    verbosity: int,
    gates: Mapping[str, bool],
    runtime_config: Sequence[str],
    extra: Sequence[str] = (),
) -> list[str]:
    """extra: more flags, last (e.g. an audit log for a benchmark)."""
    args = [
        str(folder / "kube-apiserver"),
        f"--etcd-servers={etcd_url}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        "--advertise-address=127.0.0.1",
        # Endpoints may not name a loopback address (ValidateNonSpecialIP), so the
        # `kubernetes` Service gets no endpoints, as in envtest: every client here
        # reaches the server through a kubeconfig, none through that Service.
        "--endpoint-reconciler-type=none",
        f"--tls-cert-file={serving.cert}",
        f"--tls-private-key-file={serving.key}",
        f"--client-ca-file={ca}",
        f"--kubelet-client-certificate={kubelet_client.cert}",
        f"--kubelet-client-key={kubelet_client.key}",
        "--kubelet-preferred-address-types=InternalIP",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={service_accounts.cert}",
        f"--service-account-signing-key-file={service_accounts.key}",
        f"--service-cluster-ip-range={pki.SERVICE_CIDR}",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        "--allow-privileged=true",
        "--profiling=false",
        f"--v={verbosity}",
        *feature_gates(gates),
    ]
    if runtime_config:
        args.append("--runtime-config=" + ",".join(runtime_config))
    return [*args, *extra]


def controller_manager(
    folder: pathlib.Path,
    *,
    kubeconfig: pathlib.Path,
    ca: pathlib.Path,
    ca_key: pathlib.Path,
    service_account_key: pathlib.Path,
    verbosity: int,
    gates: Mapping[str, bool],
) -> list[str]:
    return [
        str(folder / "kube-controller-manager"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--leader-elect=false",
        "--secure-port=0",
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={service_account_key}",
        f"--root-ca-file={ca}",
        f"--cluster-signing-cert-file={ca}",
        f"--cluster-signing-key-file={ca_key}",
        "--controllers=*,bootstrapsigner,tokencleaner",
        *storage.KCM_FLAGS,
        "--profiling=false",
        f"--v={verbosity}",
        *feature_gates(gates),
    ]


def scheduler(
    folder: pathlib.Path,
    *,
    kubeconfig: pathlib.Path,
    verbosity: int,
    gates: Mapping[str, bool],
    config: pathlib.Path | None = None,
) -> list[str]:
    """config: a KubeSchedulerConfiguration file (profiles, plugins), if any."""
    args = [
        str(folder / "kube-scheduler"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--leader-elect=false",
        "--secure-port=0",
        "--profiling=false",
        f"--v={verbosity}",
        *feature_gates(gates),
    ]
    return [*args, f"--config={config}"] if config is not None else args
