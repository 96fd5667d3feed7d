"""The two API servers benchmarks/real_api_scale.py runs the operator on, each yielding
(a client, the operator process, `writes()`: the operator's API writes since `mark()`,
as "verb resource[/subresource]", `mark`), the job namespace created. A helper of the
benchmark scripts beside it (no measurement of its own: `make bench` running it does
nothing)."""

from __future__ import annotations

import contextlib
import json
import pathlib

import kubernetes
import yaml

from ddpjob_devcluster.apiserver.emulator import KubeEmulator
from ddpjob_devcluster.clusters.client import OperatorProcess
from ddpjob_devcluster.clusters.real import RealCluster
from ddpjob_devcluster.controlplane.controlplane import ControlPlane
from emulated_operator import crd_client  # scripts: their folder is on the path

WRITES = ("create", "update", "patch", "delete")
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata", "verbs": list(WRITES)}, {"level": "None"}],
}


@contextlib.contextmanager
def emulator_backend(tmp: pathlib.Path, namespace: str):
    """The operator process against `KubeEmulator`, the CRD applied; its writes counted
    from the emulator's request log."""
    with KubeEmulator() as emu:
        kubeconfig, api = crd_client(emu, tmp, namespace)
        kubernetes.client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})  # type: ignore[arg-type]  # a dict body: the client sends it as it is
        operator = OperatorProcess(kubeconfig, tmp / "operator.log", namespace).start()
        first = [0]

        def writes() -> list[str]:
            return [
                f"{r.verb} {r.resource}{'/' + r.subresource if r.subresource else ''}"
                for r in emu.requests[first[0] :]
                if r.verb in WRITES
                and r.namespace == namespace
                and not (r.resource == "pods" and r.subresource == "status")
                and not (r.resource == "ddpjobs" and r.verb == "create")
            ]

        def mark() -> None:
            first[0] = len(emu.requests)

        try:
            yield api, operator, writes, mark
        finally:
            operator.stop()
            api.close()


@contextlib.contextmanager
def real_backend(tmp: pathlib.Path, namespace: str):
    """Upstream kube-apiserver, etcd, controller manager and scheduler (`make control-plane`),
    no Nodes, the operator installed from the chart; its writes counted from the server's
    audit log (the operator's ServiceAccount)."""
    policy, audit = tmp / "audit-policy.yaml", tmp / "audit.log"
    policy.write_text(yaml.safe_dump(AUDIT_POLICY))
    plane = ControlPlane(
        tmp / "plane",
        api_server_args=[f"--audit-policy-file={policy}", f"--audit-log-path={audit}", "--audit-log-maxsize=0"],
    )
    with plane:
        cluster = RealCluster(tmp / "cluster", plane=plane, namespace=namespace, nodes=()).start()
        user = f"system:serviceaccount:{namespace}:ddpjob-ddpjob-operator"
        offset = [0]

        def writes() -> list[str]:
            out = []
            with open(audit) as f:
                f.seek(offset[0])
                for line in f:
                    entry = json.loads(line)
                    ref = entry.get("objectRef") or {}
                    if entry.get("stage") != "ResponseComplete" or entry["user"].get("username") != user:
                        continue
                    if entry["verb"] in WRITES and ref.get("resource"):
                        code = (entry.get("responseStatus") or {}).get("code", 200)
                        out.append(
                            f"{entry['verb']} {ref['resource']}"
                            f"{'/' + ref['subresource'] if ref.get('subresource') else ''}"
                            f"{f' ({code})' if code >= 300 else ''}"
                        )
            return out

        def mark() -> None:
            offset[0] = audit.stat().st_size if audit.exists() else 0

        try:
            yield cluster.api, cluster.operator, writes, mark
        finally:
            cluster.stop()
