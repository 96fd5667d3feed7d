"""One Pod of a training job deleted mid-run, on a cluster: an elastic job (it shrinks,
re-creates the Pod and grows back) or a rigid one (its gang restarts), measured the same
way (`run`: tests/devcluster/scenarios/test_elastic_emulator.py). Its training job
(`job`) is also the one heal.py takes through joins and losses.

Every number comes from outside the operator: the API server (the Pod deleted, the job's
status and Events) and the trainer's sample log (`--sample-log`: each group's size and
the time of its first step; the exactly-once audit).

- back to training: from the delete to the first step of the next group (elastic: at the
  smaller size, or 4 again if the Pod was back first; rigid: the restarted gang);
- grown back: from the delete to the first step of a group of the full size (elastic);
- samples lost / repeated over all epochs (`sample_audit.lost_and_repeated`).
"""

from __future__ import annotations

import pathlib
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from ddpjob_devcluster.clusters.client import wait_until
from ddpjob_devcluster.scenarios import sample_audit

SIZE, EPOCHS, BATCH = 8000, 3, 32


@dataclass
class Outcome:
    status: dict[str, Any]
    events: list[str]
    survivors_kept: bool  # the other Pods are the very same objects (uids) at the end
    groups: list[tuple[int, float | None]]  # (world size, first step time) of each group
    back_to_training_s: float | None
    grown_back_s: float | None
    lost: int
    repeated: int
    notes: list[str] = field(default_factory=list)
    # status.lostIndices as first seen after the delete: the API server kept it (the CRD's schema)
    lost_indices: list[dict[str, Any]] | None = None


def job(
    name: str,
    samples: pathlib.Path,
    *,
    elastic: bool,
    nodes: int = 4,
    backoff: int = 10,
    step_seconds: float = 0,
    max_nodes: int | None = None,
    size: int = SIZE,
    epochs: int = EPOCHS,
    launch: tuple[str, ...] = (),
    release: pathlib.Path | None = None,
) -> dict[str, Any]:
    """`max_nodes`: the elastic range's top (default `nodes`); `launch`: ddpjob-launch's own
    flags (`--resize restart`: torchrun's elastic agent instead of the resize in place);
    `release`: a file whose creation ends the `step_seconds` floor (the test has seen what
    it waited for: the rest of the job is only its end, at full speed)."""
    spec: dict[str, Any] = {
        "nodes": nodes,
        "nprocPerNode": 1,
        "image": "ddpjob/trainer:test",
        "command": ["ddpjob-launch"],
        "args": [
            *launch,
            "ddpjob-train",
            "--data",
            "synthetic",
            "--synthetic-size",
            str(size),
            "--epochs",
            str(epochs),
            "--batch-size",
            str(BATCH),
            "--eval-every",
            "0",
            "--log-every",
            "20",
            "--checkpoint-every-steps",
            "10",
            "--sample-log",
            str(samples),
        ],
        "checkpoint": {"claimName": f"{name}-checkpoints"},
        "restartBackoffSeconds": backoff,
    }
    if step_seconds:  # a test's floor on the training time, so the job outlasts its resize
        spec["env"] = [{"name": "DDPJOB_TEST_STEP_SECONDS", "value": str(step_seconds)}]
        if release is not None:
            spec["env"].append({"name": "DDPJOB_TEST_STEP_SECONDS_UNTIL", "value": str(release)})
    if elastic:
        spec["elastic"] = {"minNodes": 2, "maxNodes": max_nodes or nodes}
    return {"apiVersion": "ddpjob.io/v1alpha1", "kind": "DDPJob", "metadata": {"name": name}, "spec": spec}


def _grown_back(samples: pathlib.Path, nodes: int, since: float) -> bool:
    """A group of the full size made its first step after `since`."""
    return any(world == nodes and t is not None and t > since for world, t in sample_audit.groups(str(samples)))


def _steps(samples: pathlib.Path) -> int:
    return sum(1 for p in samples.glob("*.jsonl") for _ in p.open()) if samples.exists() else 0


def run(
    cluster: Any,
    name: str,
    workdir: pathlib.Path,
    *,
    elastic: bool,
    lose: int = 2,
    backoff: int = 10,
    after_steps: int = 60,
    timeout: float = 420,
    start_timeout: float = 600,
    step_seconds: float = 0,
    release: bool = False,
) -> Outcome:
    """Start the job, delete Pod `lose` once `after_steps` sample-log lines exist, and
    wait for the job to finish. `release`: once a group of the full size has stepped after
    the delete, the rest of the job runs without the `step_seconds` floor."""
    samples = workdir / f"{name}-samples"
    released = workdir / f"{name}-released"
    body = job(
        name,
        samples,
        elastic=elastic,
        backoff=backoff,
        step_seconds=step_seconds,
        release=released if release else None,
    )
    nodes = body["spec"]["nodes"]
    cluster.create_job(body)
    wait_until(
        lambda: _steps(samples) >= nodes * after_steps,
        start_timeout,
        f"{name}: no training within {start_timeout:.0f} s",
        lambda: f"status {cluster.status(name)}",
    )
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in cluster.pods(name)}
    deleted_at = time.time()
    cluster.core.delete_namespaced_pod(f"{name}-{lose}", cluster.namespace)
    seen: list[list[dict[str, Any]]] = []

    def finished() -> dict[str, Any] | None:
        st = cluster.status(name)
        if st.get("lostIndices") and not seen:
            seen.append(st["lostIndices"])
        if release and not released.exists() and _grown_back(samples, nodes, deleted_at):
            released.touch()
        return st if st.get("phase") in ("Succeeded", "Failed") else None

    status = wait_until(
        finished, timeout, f"{name} did not finish", lambda: f"status {cluster.status(name)}", interval=1.0
    )
    after = {p["metadata"]["name"]: p["metadata"]["uid"] for p in cluster.pods(name)}
    kept = all(after.get(pod) == uid for pod, uid in uids.items() if pod != f"{name}-{lose}")
    groups = sample_audit.groups(str(samples))
    later = [(world, t) for world, t in groups if t is not None and t > deleted_at]
    back = later[0][1] - deleted_at if later else None
    full = [t for world, t in later if world == nodes]
    lost, repeated = sample_audit.lost_and_repeated(str(samples), SIZE, EPOCHS)
    events = [f"{e.get('reason')}: {e.get('message')}" for e in cluster.events(name)]
    return Outcome(
        status,
        events,
        kept,
        groups,
        back,
        full[0] - deleted_at if full else None,
        lost,
        repeated,
        lost_indices=seen[0] if seen else None,
    )


def report(label: str, outcome: Outcome) -> str:
    def fmt(s: float | None) -> str:
        return "-" if s is None else f"{s:.1f} s"

    return (
        f"{label}: restarts {outcome.status.get('restarts')}, resizes {outcome.status.get('resizes', 0)}, "
        f"survivors kept {outcome.survivors_kept}, groups {[w for w, _ in outcome.groups]}, "
        f"back to training {fmt(outcome.back_to_training_s)}, grown back {fmt(outcome.grown_back_s)}, "
        f"samples lost {outcome.lost}, repeated {outcome.repeated}"
    )


if __name__ == "__main__":  # pragma: no cover - a reminder, not an entry point
    sys.exit("use tests/devcluster/scenarios/test_elastic_emulator.py or benchmarks/elastic_resize.py")
