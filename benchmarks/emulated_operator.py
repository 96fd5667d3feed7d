"""The operator in a process of its own against the API emulator
(`ddpjob_devcluster.apiserver.emulator`), as the benchmarks beside it run it: configured by
KUBECONFIG like in a shell, so its RSS and CPU time are its own. And what those benchmarks
do on the emulator's side: a client with the DDPJob CRD applied, code run on the emulator's
loop, the kubelet's status writes, its event log followed. A helper of the benchmark
scripts beside it (no measurement of its own: `make bench` running it does nothing)."""

from __future__ import annotations

import asyncio
import collections
import os
import pathlib
import subprocess
import sys
from typing import Any

import kubernetes
import yaml
from kmock import resource

from ddpjob_devcluster.apiserver.emulator import KubeEmulator

ROOT = pathlib.Path(__file__).resolve().parents[1]
JOBS = resource("ddpjob.io/v1alpha1/ddpjobs")
PODS = resource("v1/pods")
EVENTS = resource("v1/events")
NS = "default"


def ddpjob(name: str, nodes: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"nodes": nodes, "image": "ddpjob/trainer:bench", "restartBackoffSeconds": 0, **spec},
    }


def crd_client(
    emu: KubeEmulator, folder: pathlib.Path, namespace: str = NS
) -> tuple[pathlib.Path, kubernetes.client.ApiClient]:
    """The emulator's kubeconfig written in `folder` (its context on `namespace`), a client
    of it, and the DDPJob CRD applied through that client."""
    path = emu.write_kubeconfig(folder / "kubeconfig", namespace=namespace)
    api = kubernetes.config.new_client_from_config(str(path))
    crd = yaml.safe_load((ROOT / "manifests/crd/ddpjobs.ddpjob.io.yaml").read_text())
    kubernetes.client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
    return path, api


def start_operator(
    kubeconfig: pathlib.Path, log_path: str | os.PathLike[str], env: dict[str, str] | None = None, prelude: str = ""
) -> subprocess.Popen:
    """`run_operator` on NS in a process of its own, its output to `log_path`. `env` is added
    to this process's environment; `prelude`, Python run before it (another transport)."""
    # The operator writes to its own copy of the file; ours closes once it has started.
    with open(log_path, "w") as log:
        return subprocess.Popen(
            [
                sys.executable,
                "-c",
                prelude + "from ddpjob.operator.main import run_operator; "
                f"run_operator({NS!r}, True, None, None, None)",
            ],
            env={**os.environ, "KUBECONFIG": str(kubeconfig), **(env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def in_emulator(emu: KubeEmulator, fn, timeout: float = 120) -> Any:
    """Run `fn()` on the emulator's loop thread (its store is not thread-safe for writers)."""

    async def call():
        return fn()

    assert emu._loop is not None, "the emulator is not started"
    return asyncio.run_coroutine_threadsafe(call(), emu._loop).result(timeout=timeout)


def kubelet(emu: KubeEmulator, names: list[str], phase: str) -> None:
    """Report `phase` for every Pod in `names`, as the kubelet would (pods/status)."""
    state = {
        "Running": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
        "Succeeded": {"terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": "2026-01-01T00:00:01Z"}},
    }[phase]
    patch = {"status": {"phase": phase, "containerStatuses": [{"name": "trainer", "state": state}]}}

    def apply():
        for name in names:
            emu.store.patch(PODS, NS, name, "status", "application/merge-patch+json", patch)

    in_emulator(emu, apply)


class Tracker:
    """Follows the emulator's event log incrementally: polling the whole store would
    cost O(objects) per poll and starve the emulator's thread (one GIL, two cores)."""

    def __init__(self, emu: KubeEmulator):
        self.emu, self.position = emu, 0
        self.pods: collections.Counter = collections.Counter()  # job -> Pods ever created
        self.phase: dict[str, str | None] = {}  # job -> status.phase
        self.events: collections.Counter = collections.Counter()  # job -> Events posted

    def poll(self) -> Tracker:
        with self.emu.store.transaction():  # no write lands while the log is read
            fresh = self.emu.store.events.entries[self.position :]
            self.position += len(fresh)
        for _, res, event in fresh:
            obj = event["object"]
            if res == PODS and event["type"] == "ADDED":
                self.pods[obj["metadata"]["labels"].get("ddpjob.io/job-name")] += 1
            elif res == JOBS and event["type"] != "DELETED":
                self.phase[obj["metadata"]["name"]] = (obj.get("status") or {}).get("phase")
            elif res == EVENTS and event["type"] == "ADDED":
                self.events[obj["involvedObject"]["name"]] += 1
        return self

    def phases(self, prefix: str) -> collections.Counter:
        return collections.Counter(p for n, p in self.phase.items() if n.startswith(prefix))
