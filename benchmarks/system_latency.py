#!/usr/bin/env python3
"""Whole-system latency: `kubectl apply` of the example job to its first training step
and to `Succeeded`, on the real control plane (`RealCluster`: kube-apiserver, etcd,
controller manager and scheduler, the operator installed from the chart, a process
kubelet registered as a Node; gloo on CPU).

    python benchmarks/system_latency.py [--runs 3] [--json FILE]

Each run applies the example (`manifests/examples/mnist-cpu.yaml`, renamed per run)
with kubectl, adding only `--log-every 1` and a metrics file so that the first step is
recorded. The time is split at points every part already records on one clock
(time.time() on this machine):

  apply             kubectl apply starts -> the DDPJob is stored (kubectl's discovery
                    and the request)
  operator reaction DDPJob stored -> the operator's first write for it (the Service)
  pod creation      -> all 2 Pods exist
  process start     -> the kubelet has started both Pods' processes (its watch + fork/exec)
  torchrun start    -> torchrun's first log line on both Pods: `ddpjob-launch` started,
                    checked MASTER_ADDR and started torchrun, which imported torch
  rendezvous        -> the trainer's `start` record: torchrun started 2 workers per Pod
                    (each imports torch again), the static TCPStore rendezvous and
                    init_process_group (gloo), the synthetic data and the model
  first step        -> the first optimizer step's record (`--log-every 1`)
  training          -> the `final` record (3 epochs)
  process exit      -> both Pods' main processes have exited (process group teardown,
                    torchrun noticing its workers are done)
  status            -> the DDPJob says Succeeded (the kubelet's pods/status writes, the
                    operator's reconcile and status write)

The operator is started and proven ready (it reconciles a suspended warm-up job) before
the first run, so its start-up is not counted. The API objects are followed with watches
through the HTTP API: each boundary is the time its event reached this script (late by
the server's watch fan-out, a few ms).
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import os
import pathlib
import re
import statistics
import sys
import tempfile
import threading
import time

import kubernetes
import yaml

from ddpjob.api import names
from ddpjob_devcluster.clusters.client import load_example, read_metrics, wait_until
from ddpjob_devcluster.clusters.real import RealCluster

ROOT = pathlib.Path(__file__).resolve().parents[1]
PHASES = (
    "apply",
    "operator reaction",
    "pod creation",
    "process start",
    "torchrun start",
    "rendezvous",
    "first step",
    "training",
    "process exit",
    "status",
)
# torch's (glog-style) log prefix, e.g. "W1122 06:21:00.728000 18871 torch/distributed/run.py:982]"
GLOG = re.compile(r"\] [IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6}) ")


def first_torch_log(path: pathlib.Path) -> float | None:
    """The time of torchrun's first log line in a container's output (local time); None
    where torchrun logged nothing (it warns only when it sets OMP_NUM_THREADS itself, and
    ddpjob-launch now sets it first)."""
    for line in path.read_text(errors="replace").splitlines():
        m = GLOG.search(line)
        if m:
            month, day, hour, minute, second, micro = map(int, m.groups())
            now = datetime.datetime.now()
            return datetime.datetime(now.year, month, day, hour, minute, second, micro).timestamp()
    return None


class Sampler:
    """First-seen times of API states, from watches on the job, its Service and its Pods."""

    def __init__(self, cluster: RealCluster, name: str, nodes: int):
        self.name, self.nodes = name, nodes
        self.seen: dict[str, float] = {}
        self.pods: set[str] = set()
        self.done = threading.Event()
        ns, core, custom = cluster.namespace, cluster.core, cluster.custom
        by_name = {"field_selector": f"metadata.name={name}"}
        watches = (
            (custom.list_namespaced_custom_object, (names.GROUP, names.VERSION, ns, names.PLURAL), by_name, self._job),
            (core.list_namespaced_service, (ns,), by_name, self._service),
            (core.list_namespaced_pod, (ns,), {"label_selector": f"{names.LABEL_JOB_NAME}={name}"}, self._pod),
        )
        self.threads = [threading.Thread(target=self._follow, args=w, daemon=True) for w in watches]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()
        time.sleep(1.0)  # the streams open (an object made before would show late, as listed)

    def stop(self) -> None:
        self.done.set()
        for thread in self.threads:
            thread.join(timeout=10)

    def mark(self, key: str, condition: bool) -> None:
        if condition and key not in self.seen:
            self.seen[key] = time.time()

    def _follow(self, list_fn, args, selector, handle) -> None:
        while not self.done.is_set():
            try:
                for event in kubernetes.watch.Watch().stream(
                    list_fn, *args, timeout_seconds=5, deserialize=False, **selector
                ):
                    handle(event["type"], event["object"])
                    if self.done.is_set():
                        return
            except Exception:  # noqa: BLE001 - a dropped stream: watched again (states keep their first time)
                self.done.wait(0.2)

    def _job(self, verb: str, job: dict) -> None:
        self.mark("stored", verb != "DELETED")
        phase = (job.get("status") or {}).get("phase")
        self.mark("succeeded", phase == "Succeeded")
        if phase in ("Succeeded", "Failed"):
            self.seen.setdefault("finished", time.time())

    def _service(self, verb: str, _: dict) -> None:
        self.mark("service", verb != "DELETED")

    def _pod(self, verb: str, pod: dict) -> None:
        if verb == "ADDED":
            self.pods.add(pod["metadata"]["uid"])
        self.mark("pods", len(self.pods) == self.nodes)


def run_once(cluster: RealCluster, index: int, workdir: pathlib.Path) -> dict[str, float]:
    body = copy.deepcopy(load_example())
    name = f"{body['metadata']['name']}-{index}"
    body["metadata"]["name"] = name
    metrics = workdir / f"{name}.jsonl"
    body["spec"]["args"] = [*body["spec"]["args"], "--log-every", "1", "--metrics-file", str(metrics)]
    manifest = workdir / f"{name}.yaml"
    manifest.write_text(yaml.safe_dump(body))
    nodes = body["spec"]["nodes"]

    sampler = Sampler(cluster, name, nodes)
    sampler.start()
    t_apply = time.time()
    try:
        cluster.kubectl("apply", "-f", str(manifest))
        wait_until(lambda: "finished" in sampler.seen, 300, f"{name} did not finish")
    finally:
        sampler.stop()
    status = cluster.status(name)
    if status.get("phase") != "Succeeded":
        raise RuntimeError(f"{name} ended {status}:\n{cluster.diagnostics()}")

    assert cluster.kubelet is not None  # started
    containers = [c for c in cluster.kubelet.snapshot() if c.job == name]
    records = read_metrics(metrics)
    start = next(r["time"] for r in records if r["event"] == "start")
    first_step = next(r["time"] for r in records if r["event"] == "step")
    final = next(r["time"] for r in records if r["event"] == "final")
    logged = [first_torch_log(c.log_path) for c in containers]
    torchrun = None if None in logged else max(t for t in logged if t is not None)
    marks = [
        t_apply,
        sampler.seen["stored"],
        sampler.seen["service"],
        sampler.seen["pods"],
        max(c.times["started"] for c in containers),
        torchrun if torchrun is not None else max(c.times["started"] for c in containers),
        start,
        first_step,
        final,
        max(c.times["exited"] for c in containers),
        sampler.seen["succeeded"],
    ]
    result = {phase: marks[i + 1] - marks[i] for i, phase in enumerate(PHASES)}
    if torchrun is None:  # not told apart: "rendezvous" counts from the process start
        result["torchrun start"] = float("nan")
    result["apply -> first step"] = first_step - t_apply
    result["apply -> Succeeded"] = sampler.seen["succeeded"] - t_apply
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--json", help="also write the raw numbers here")
    args = p.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="ddpjob-system-latency-") as tmp:
        workdir = pathlib.Path(tmp)
        with RealCluster(workdir / "cluster", namespace="latency") as cluster:
            warmup = copy.deepcopy(load_example())
            warmup["metadata"]["name"] = "warmup"
            warmup["spec"]["suspend"] = True
            cluster.create_job(warmup)
            cluster.wait_phase("warmup", "Suspended", timeout=60)
            runs = []
            for i in range(args.runs):
                runs.append(run_once(cluster, i, workdir))
                print(
                    f"run {i + 1}/{args.runs}: apply -> first step {runs[-1]['apply -> first step']:.2f} s, "
                    f"-> Succeeded {runs[-1]['apply -> Succeeded']:.2f} s",
                    flush=True,
                )

    load = os.getloadavg()
    print(
        f"\n{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
        f"median (min-max) of {len(runs)} runs, seconds"
    )
    print(f"{'step':<22}{'median':>8}{'min':>8}{'max':>8}")
    for key in (*PHASES, "apply -> first step", "apply -> Succeeded"):
        values = [r[key] for r in runs]
        print(f"{key:<22}{statistics.median(values):>8.3f}{min(values):>8.3f}{max(values):>8.3f}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"runs": runs, "loadavg": load}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
