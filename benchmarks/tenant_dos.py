"""One tenant's load against another tenant's job start-up, on the real control plane.

The operator serves every namespace (chart `watch.scope: cluster`). A probe tenant
(namespace `probe`) creates small jobs one at a time and times creation -> all of its
Pods exist, with nothing else going on (the baseline), then while a noisy tenant (namespace
`noisy`, the same operator) does, one load at a time:

1. `--flood-jobs` one-node jobs created at once (the review's 1,000);
2. one `--large-nodes`-node job (the review's 1,024);
3. an Event flood: `--events` Events posted to its namespace from 16 threads (any user
   who may create Events can; the operator watches none, the API server stores them all);
4. an update flood: `--updates` label patches of its flood jobs from 16 threads (each is
   a watch event the operator takes: a DDPJob's metadata is anyone's with `patch`).

No Nodes (Pods stay Pending: "exist" is what is timed, as in real_api_scale.py). Each load
is cleared (its namespace's jobs deleted, Pods gone) before the next. The defaults are the
review's sizes, which a 2-core machine runs in minutes (Pods without Nodes cost the API
server and the operator, not a kubelet); halve them on a smaller one.

    .venv/bin/python benchmarks/tenant_dos.py [--probes 10] [--flood-jobs 1000] [--large-nodes 1024]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pathlib
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any, cast

import kubernetes

from ddpjob_devcluster.clusters.real import RealCluster
from ddpjob_devcluster.controlplane.controlplane import ControlPlane
from plane_operator import Tracker, wait  # scripts: their folder is on the path

PROBE, NOISY = "probe", "noisy"
GROUP = ("ddpjob.io", "v1alpha1")


def ddpjob(name: str, nodes: int) -> dict[str, Any]:
    return {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {"name": name},
        "spec": {"nodes": nodes, "image": "ddpjob/trainer:bench", "restartBackoffSeconds": 0},
    }


class Tenants:
    def __init__(self, api: kubernetes.client.ApiClient):
        self.custom, self.core = kubernetes.client.CustomObjectsApi(api), kubernetes.client.CoreV1Api(api)
        self.pods = {ns: Tracker(api, ns, kinds=("pods",)) for ns in (PROBE, NOISY)}

    def create(self, ns: str, name: str, nodes: int) -> None:
        self.custom.create_namespaced_custom_object(*GROUP, ns, "ddpjobs", ddpjob(name, nodes))

    def probe(self, runs: int, tag: str) -> list[float]:
        """Seconds from each probe job's create to its 2 Pods existing, one job at a time."""
        out = []
        for i in range(runs):
            name, start = f"{tag}-{i}", time.perf_counter()
            self.create(PROBE, name, 2)
            out.append(wait(lambda job=name: self.pods[PROBE].count(job) == 2, 600, 0.01) - start)
        return out

    def clear(self, ns: str) -> None:
        self.custom.delete_collection_namespaced_custom_object(*GROUP, ns, "ddpjobs")
        wait(
            lambda: (
                not self.core.list_namespaced_pod(ns, limit=1).items
                and not cast(dict[str, Any], self.custom.list_namespaced_custom_object(*GROUP, ns, "ddpjobs", limit=1))[
                    "items"
                ]
            ),
            900,
            1,
        )


def in_background(load: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    return thread


def flood(t: Tenants, count: int) -> Callable[[], None]:
    def run() -> None:
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda i: t.create(NOISY, f"flood-{i}", 1), range(count)))

    return run


def events(t: Tenants, count: int) -> Callable[[], None]:
    def one(i: int) -> None:
        t.core.create_namespaced_event(
            NOISY,
            {  # type: ignore[arg-type]  # a dict body: the client sends it as it is
                "metadata": {"name": f"noise-{i}"},
                "involvedObject": {"kind": "Pod", "name": "x", "namespace": NOISY},
                "reason": "Noise",
                "message": "n" * 512,
                "type": "Normal",
            },
        )

    def run() -> None:
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(one, range(count)))

    return run


def updates(t: Tenants, jobs: int, count: int) -> Callable[[], None]:
    def one(i: int) -> None:
        t.custom.patch_namespaced_custom_object(
            *GROUP, NOISY, "ddpjobs", f"flood-{i % jobs}", {"metadata": {"labels": {"noise": str(i)}}}
        )

    def run() -> None:
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(one, range(count)))

    return run


def summary(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {"p50_ms": statistics.median(ordered) * 1000, "max_ms": ordered[-1] * 1000}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    t: Tenants | None = None
    with tempfile.TemporaryDirectory() as tmp, ControlPlane(pathlib.Path(tmp) / "plane") as plane:
        cluster = RealCluster(
            pathlib.Path(tmp) / "cluster", plane=plane, namespace=PROBE, nodes=(), scope="cluster"
        ).start()
        try:
            cluster.core.create_namespace({"metadata": {"name": NOISY}})  # type: ignore[arg-type]  # a dict body: the client sends it as it is
            wait(lambda: cluster.core.list_namespaced_service_account(NOISY).items, 60, 0.2)
            assert cluster.api is not None  # started
            t = Tenants(cluster.api)
            t.probe(2, "warmup")
            rows["quiet"] = summary(t.probe(args.probes, "quiet"))

            load = in_background(flood(t, args.flood_jobs))
            rows[f"{args.flood_jobs} jobs created at once"] = summary(t.probe(args.probes, "flood"))
            load.join()
            start = time.perf_counter()
            wait(
                lambda: t.pods[NOISY].count(*(f"flood-{i}" for i in range(args.flood_jobs))) == args.flood_jobs,
                1800,
                0.5,
            )
            rows["flood_all_pods_s"] = time.perf_counter() - start

            load = in_background(updates(t, args.flood_jobs, args.updates))
            rows[f"{args.updates} label patches of those jobs"] = summary(t.probe(args.probes, "updates"))
            load.join()
            t.clear(NOISY)

            t.create(NOISY, "large", args.large_nodes)
            rows[f"one {args.large_nodes}-node job"] = summary(t.probe(args.probes, "large"))
            wait(lambda: t.pods[NOISY].count("large") == args.large_nodes, 1800, 0.5)
            t.clear(NOISY)

            load = in_background(events(t, args.events))
            rows[f"{args.events} Events posted"] = summary(t.probe(args.probes, "events"))
            load.join()
        finally:
            for counter in t.pods.values() if t is not None else ():
                counter.stop.set()
            cluster.stop()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--probes", type=int, default=10)
    parser.add_argument("--flood-jobs", type=int, default=1000)
    parser.add_argument("--large-nodes", type=int, default=1024)
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--updates", type=int, default=2000)
    args = parser.parse_args()
    rows = measure(args)
    print(f"load average: {os.getloadavg()}")
    print(json.dumps(rows))
    print("| the noisy tenant | probe job -> 2 Pods, p50 (ms) | max (ms) |\n|---|---:|---:|")
    for label, row in rows.items():
        if isinstance(row, dict):
            print(f"| {label} | {row['p50_ms']:.0f} | {row['max_ms']:.0f} |")
    # The Pod watches' daemon threads may still be inside the client when the interpreter
    # finalizes, which aborted it (exit 134) after the results were printed.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
