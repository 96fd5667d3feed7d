"""One run of benchmarks/pod_startup.py: a job applied with kubectl, and when each boundary
of its start-up was seen (the phases that script's description names, in PHASES): a watch
on the job's Pods, the trainer's metrics records, a DNS probe Pod on kind. A helper of the
benchmark scripts beside it (no measurement of its own: `make bench` running it does
nothing)."""

from __future__ import annotations

import copy
import json
import pathlib
import subprocess
import threading
import time
from typing import Any, cast

import kubernetes
import yaml

from ddpjob_devcluster.clusters.client import load_example, read_metrics, wait_until

PHASES = ("pods", "scheduling", "sandbox", "container start", "DNS", "rendezvous", "first step", "succeeded")


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
