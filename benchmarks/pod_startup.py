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
import copy
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, cast

import kubernetes
import yaml

from ddpjob_devcluster.clusters.client import load_example, read_metrics, wait_until

PHASES = ("pods", "scheduling", "sandbox", "container start", "DNS", "rendezvous", "first step", "succeeded")
SLO_SECONDS = 5.0


class PodWatch(threading.Thread):
    """When each Pod of a job was first seen existing, placed, with an IP, running."""

    def __init__(self, api: kubernetes.client.ApiClient, namespace: str, job: str):
        super().__init__(daemon=True)
        self.core, self.namespace, self.job = kubernetes.client.CoreV1Api(api), namespace, job
        self.seen: dict[str, dict[str, float]] = {}
        self.watch = kubernetes.watch.Watch()
        self.stopped = threading.Event()

    def stop(self) -> None:
        self.stopped.set()
        self.watch.stop()

    def run(self) -> None:
        try:
            self._watch()
        except Exception:
            # Once stopped, a stream cut mid-chunk ("Response ended prematurely") is the
            # end asked for; before that it is an error, and the marks it lacks fail the run.
            if not self.stopped.is_set():
                raise

    def _watch(self) -> None:
        for event in self.watch.stream(
            self.core.list_namespaced_pod,
            self.namespace,
            timeout_seconds=600,
            label_selector=f"ddpjob.io/job-name={self.job}",
        ):
            now, pod = time.time(), event["object"]
            marks = self.seen.setdefault(pod.metadata.name, {})
            marks.setdefault("exists", now)
            if pod.spec.node_name:
                marks.setdefault("scheduled", now)
            if pod.status.pod_ip:
                marks.setdefault("ip", now)
            statuses = pod.status.container_statuses or []
            if statuses and statuses[0].state.running:
                marks.setdefault("running", now)

    def last(self, mark: str, pods: int = 2) -> float:
        times = [m[mark] for m in self.seen.values() if mark in m]
        if len(times) < pods:
            raise RuntimeError(f"{self.job}: only {len(times)} Pod(s) seen {mark}: {self.seen}")
        return max(times)


def job_body(name: str, claim: str) -> dict[str, Any]:
    body = copy.deepcopy(load_example())
    body["metadata"] = {"name": name}
    body["spec"]["args"] = [*body["spec"]["args"], "--log-every", "1"]
    body["spec"]["checkpoint"] = {"claimName": claim}  # where the metrics file is written
    return body


def run_once(
    api: kubernetes.client.ApiClient,
    kubectl: list[str],
    namespace: str,
    name: str,
    metrics: pathlib.Path,
    dns: DnsProbe | None,
) -> dict[str, float]:
    body = job_body(name, f"{name}-checkpoints")
    watch = PodWatch(api, namespace, name)
    watch.start()
    if dns is not None:
        dns.ask(f"{name}-0.{name}.{namespace}.svc")
    started = time.time()
    subprocess.run(
        [*kubectl, "-n", namespace, "apply", "-f", "-"],
        input=yaml.safe_dump(body),
        text=True,
        check=True,
        capture_output=True,
    )
    custom = kubernetes.client.CustomObjectsApi(api)

    def succeeded() -> float | None:
        job = cast(
            dict[str, Any], custom.get_namespaced_custom_object("ddpjob.io", "v1alpha1", namespace, "ddpjobs", name)
        )
        phase = (job.get("status") or {}).get("phase")
        if phase == "Failed":
            raise RuntimeError(f"{name} failed: {job['status']}")
        return time.time() if phase == "Succeeded" else None

    done = wait_until(succeeded, 600, f"{name} did not succeed", interval=0.05)
    watch.stop()
    records = read_metrics(metrics)
    start = next(r["time"] for r in records if r["event"] == "start")
    first = next(r["time"] for r in records if r["event"] == "step")
    marks = [started, watch.last("exists"), watch.last("scheduled"), watch.last("ip"), watch.last("running")]
    # The first four phases, between the marks the watch saw; the others follow.
    out = {p: b - a for p, a, b in zip(PHASES, marks, marks[1:], strict=False)}
    out["DNS"] = dns.resolved(watch.seen[f"{name}-0"]["ip"]) if dns is not None else float("nan")
    out.update(
        {
            "rendezvous": start - marks[-1],
            "first step": first - start,
            "succeeded": done - first,
            "pod start-up (SLO)": marks[-1] - marks[1],
            "apply -> first step": first - started,
            "apply -> Succeeded": done - started,
        }
    )
    return out


class DnsProbe:
    """A Pod that resolves the names it is given every 50 ms and prints when each first
    resolved: cluster DNS's answer time, seen from inside the cluster."""

    def __init__(self, kubectl: list[str], namespace: str, image: str):
        self.kubectl, self.namespace, self.image, self.name = kubectl, namespace, image, "dns-probe"
        self.names: list[str] = []

    def ask(self, name: str) -> None:
        self.names.append(name)
        script = (
            'for n in "$@"; do until getent hosts "$n" >/dev/null; do sleep 0.05; done; '
            'echo "$n $(date +%s.%N)"; done; sleep 3600'
        )
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": self.name},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 0,
                "securityContext": {
                    "runAsNonRoot": True,
                    "runAsUser": 65534,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "containers": [
                    {
                        "name": "probe",
                        "image": self.image,
                        "imagePullPolicy": "Never",
                        "command": ["bash", "-c", script, "probe", name],
                        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                    }
                ],
            },
        }
        self._kubectl("delete", "pod", self.name, "--ignore-not-found", "--wait=true", "--grace-period=0")
        subprocess.run(
            [*self.kubectl, "-n", self.namespace, "apply", "-f", "-"],
            input=json.dumps(pod),
            text=True,
            check=True,
            capture_output=True,
        )
        self._kubectl("wait", f"pod/{self.name}", "--for=condition=Ready", "--timeout=120s")

    def resolved(self, ip_seen: float) -> float:
        name = self.names[-1]

        def answer() -> float | None:
            for line in self._kubectl("logs", self.name).splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
            return None

        return max(0.0, wait_until(answer, 60, f"{name} never resolved") - ip_seen)

    def _kubectl(self, *args: str) -> str:
        return subprocess.run(
            [*self.kubectl, "-n", self.namespace, *args], check=True, capture_output=True, text=True
        ).stdout


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
