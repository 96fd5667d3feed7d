#!/usr/bin/env python3
"""Pod start-up on real kubelets against the process kubelet, in one run: `kubectl apply`
of a 2-node job (the example, 2 x 2 processes, gloo on CPU) to its first training step
and to `Succeeded`, on a kind cluster (kubelet, containerd, runc, the CNI plugins,
CoreDNS; the trainer image already on the nodes) and on the real control plane with
process kubelets (the system tests' backend), and where the time goes.

    python benchmarks/pod_startup.py [--runs 3] [--kind-context kind-ddpjob-e2e
        --kind-namespace ddpjob-e2e --kind-shared DIR --kind-tools-image IMAGE] [--json FILE]

The kind half needs the kind tier's cluster with the operator installed: its `bench`
scenario runs this script there (`E2E_SCENARIOS="bench" make e2e-kind`). Without
--kind-context the process kubelet half runs alone.

Each boundary is the time this process saw it (one clock): a watch on the job's Pods
sees each change as the API server stores it; the trainer's metrics records (`start`,
the first `step`) carry the trainer's time.time() on the same machine.

  pods              kubectl apply starts -> both Pods exist (kubectl, the operator's
                    reaction, its creates)
  scheduling        -> both Pods have a node
  sandbox           -> both Pods have an IP (kind: the Pod sandbox, pause, the CNI plugins)
  container start   -> both trainer containers running (kind: runc create and start;
                    the image is on the node: pulls are excluded, as the SLO excludes them)
  DNS               (kind only) Pod 0 has an IP -> its name (MASTER_ADDR) resolves in
                    cluster DNS, asked every 50 ms by a probe Pod in the namespace; the
                    process kubelet rewrites MASTER_ADDR to 127.0.0.1
  rendezvous        containers running -> the trainer's `start` record (Python and torch
                    imports, the launcher's DNS wait, torchrun's workers, the static
                    rendezvous, init_process_group)
  first step        -> the first step's record (`--log-every 1`)
  succeeded         -> the DDPJob's Succeeded condition
The anchor is Kubernetes' pod start-up SLO: 5 s from a Pod's creation to its containers
running, image pulls excluded (`pods` end -> `container start` end, here for both Pods).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile

import kubernetes

from startup_run import PHASES, DnsProbe, run_once  # scripts: their folder is on the path

SLO_SECONDS = 5.0


def kind_half(args: argparse.Namespace) -> list[dict[str, float]]:
    api = kubernetes.config.new_client_from_config(context=args.kind_context)
    kubectl = ["kubectl", "--context", args.kind_context]
    dns = DnsProbe(kubectl, args.kind_namespace, args.kind_tools_image)
    runs = []
    for i in range(args.runs):
        name = f"startup-{i}"
        shared = pathlib.Path(args.kind_shared) / name
        shared.mkdir(mode=0o777)
        shared.chmod(0o777)
        volume = {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolume",
                    "metadata": {"name": f"{args.kind_namespace}-{name}"},
                    "spec": {
                        "capacity": {"storage": "1Gi"},
                        "accessModes": ["ReadWriteMany"],
                        "storageClassName": "",
                        "persistentVolumeReclaimPolicy": "Delete",
                        "hostPath": {"path": f"/var/ddpjob-shared/{name}", "type": "Directory"},
                    },
                },
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": {"name": f"{name}-checkpoints", "namespace": args.kind_namespace},
                    "spec": {
                        "accessModes": ["ReadWriteMany"],
                        "storageClassName": "",
                        "volumeName": f"{args.kind_namespace}-{name}",
                        "resources": {"requests": {"storage": "1Gi"}},
                    },
                },
            ],
        }
        subprocess.run(
            [*kubectl, "apply", "-f", "-"], input=json.dumps(volume), text=True, check=True, capture_output=True
        )
        runs.append(run_once(api, kubectl, args.kind_namespace, name, shared / "metrics.jsonl", dns))
        print(f"kind run {i + 1}: " + ", ".join(f"{k} {v:.2f}" for k, v in runs[-1].items()), file=sys.stderr)
    return runs


def process_kubelet_half(args: argparse.Namespace) -> list[dict[str, float]]:
    from ddpjob_devcluster.clusters.real import RealCluster

    runs = []
    with tempfile.TemporaryDirectory(prefix="pod-startup-") as work, RealCluster(work) as cluster:
        kubectl = [cluster.kubectl_path(), "--kubeconfig", str(cluster.kubeconfig)]
        for i in range(args.runs):
            name = f"startup-{i}"
            cluster.provide_claim(f"{name}-checkpoints", cluster.namespace)
            assert cluster.kubelet is not None and cluster.api is not None  # started
            metrics = cluster.kubelet.checkpoint_dir(name) / "metrics.jsonl"
            runs.append(run_once(cluster.api, kubectl, cluster.namespace, name, metrics, None))
            print(
                f"process kubelet run {i + 1}: " + ", ".join(f"{k} {v:.2f}" for k, v in runs[-1].items()),
                file=sys.stderr,
            )
    return runs


def table(results: dict[str, list[dict[str, float]]]) -> str:
    backends = list(results)
    lines = [
        "| step | " + " | ".join(f"{b} (median, min-max)" for b in backends) + " |",
        "|---|" + "---:|" * len(backends),
    ]
    for phase in [*PHASES, "pod start-up (SLO)", "apply -> first step", "apply -> Succeeded"]:
        cells = []
        for backend in backends:
            values = [r[phase] for r in results[backend] if r[phase] == r[phase]]  # NaN: not measured
            cells.append(f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})" if values else "-")
        lines.append(f"| {phase} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--kind-context")
    parser.add_argument("--kind-namespace", default="ddpjob-e2e")
    parser.add_argument("--kind-shared", help="the folder every kind node mounts at /var/ddpjob-shared")
    parser.add_argument("--kind-tools-image", help="an image with bash and getent on the nodes (the DNS probe)")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    results: dict[str, list[dict[str, float]]] = {}
    if args.kind_context:
        if not (args.kind_shared and args.kind_tools_image):
            parser.error("--kind-context needs --kind-shared and --kind-tools-image")
        results["kind"] = kind_half(args)
    else:
        print("kind: not measured (run it as the kind tier's bench scenario: E2E_SCENARIOS=bench make e2e-kind)")
    results["process kubelet"] = process_kubelet_half(args)
    print(table(results))
    for backend, runs in results.items():
        slo = statistics.median(r["pod start-up (SLO)"] for r in runs)
        print(
            f"{backend}: pod start-up {slo:.2f} s (median of {len(runs)}); SLO {SLO_SECONDS:.0f} s: "
            f"{'met' if slo <= SLO_SECONDS else 'missed'}"
        )
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
