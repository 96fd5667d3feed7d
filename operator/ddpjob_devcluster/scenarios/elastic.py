"""The training job of the elastic scenarios (heal.py, tests/system/test_elastic_real.py,
benchmarks/elastic_resize.py): ddpjob-train on synthetic data with a sample log
(`--sample-log`: each group's size and the time of its first step, for the exactly-once
audit), checkpoints every 10 steps, and an optional floor on each step's time so that the
job outlasts the resize a test waits for.
"""

from __future__ import annotations

import pathlib
from typing import Any

SIZE, EPOCHS, BATCH = 8000, 3, 32


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
