"""A lost node healed in place against torchrun's restart, in one run, under `ddpjob run`.

The same elastic job twice, one after the other: 3 nodes x 1 process (elastic 2..3), CPU
and gloo, `ddpjob-train` on synthetic samples (global batch 48, a checkpoint every 10
steps, `--sample-log`). Once as it runs by default (the group re-forms in the workers'
own processes: ddpjob_trainer.elastic), once with `ddpjob-launch --resize restart`
(torchrun's elastic agent restarts every worker at each change: the path before). In
each, every process of node `--node` is SIGKILLed after `--kill-after` steps; `ddpjob
run` re-creates the node after `restartBackoffSeconds` and it joins again.

Measured from the sample log (ddpjob_devcluster.scenarios.sample_audit), per mode:
- heal: the SIGKILL to the end of the first optimizer step of the next group, at whatever
  size (sample_audit.healed: the clock of scenarios/heal.py and the cluster benchmark);
- join pause: the last step of the shrunk group to the first of the grown one;
- whether the survivors' workers kept their PIDs, and the exactly-once audit.
The ratio restart / in place of each is the figure to compare across machines.

    .venv/bin/python benchmarks/in_place_resize.py [--node 1] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import sys
import tempfile
import time
import uuid

import yaml

from ddpjob_devcluster.scenarios import node_processes as procs, sample_audit

SIZE, EPOCHS, NODES = 3000, 4, 3
MODES = ("in-place", "restart")


def job(name: str, samples: pathlib.Path, mode: str, backoff: int) -> dict:
    launch = ["--resize", "restart"] if mode == "restart" else []
    return {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {"name": name},
        "spec": {
            "nodes": NODES,
            "elastic": {"minNodes": 2, "maxNodes": NODES},
            "nprocPerNode": 1,
            "image": "local",
            "command": ["ddpjob-launch"],
            "args": [
                *launch,
                "ddpjob-train",
                "--data",
                "synthetic",
                "--synthetic-size",
                str(SIZE),
                "--epochs",
                str(EPOCHS),
                "--batch-size",
                "16",
                "--eval-every",
                "0",
                "--log-every",
                "50",
                "--checkpoint-every-steps",
                "10",
                "--sample-log",
                str(samples),
            ],
            "checkpoint": {"claimName": "ckpt"},
            "env": [{"name": "DDPJOB_TEST_STEP_SECONDS", "value": "0.2"}],  # a step of a real model, roughly
            "restartBackoffSeconds": backoff,
        },
    }


def steps(samples: pathlib.Path) -> int:
    return sum(1 for p in samples.glob("*.jsonl") for _ in p.open()) if samples.exists() else 0


def wait(cond, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up: {what} within {seconds:.0f} s")
        time.sleep(0.1)


def run_one(work: pathlib.Path, mode: str, node: int, kill_after: int, backoff: int) -> dict:
    work.mkdir()
    name, samples = f"b{uuid.uuid4().hex[:6]}", work / "samples"
    (work / "job.yaml").write_text(yaml.safe_dump(job(name, samples, mode, backoff)))
    with procs.started(work, work / "job.yaml", work / "run.log") as run:
        wait(lambda: steps(samples) >= NODES * kill_after or run.poll() is not None, 300, "training started")
        others = [r for r in range(NODES) if r != node]
        workers = procs.workers(name, others)
        killed = time.time()
        for pid in procs.of_node(name, node):
            os.kill(pid, signal.SIGKILL)
        # Grown back: a group of NODES after the loss.
        wait(
            lambda: (
                any(w == NODES and t0 > killed for w, t0, _ in sample_audit.spans(str(samples)))
                or run.poll() is not None
            ),
            300,
            "the node back in the group",
        )
        kept = procs.workers(name, others) == workers and len(workers) == len(others)
        run.wait(timeout=600)
    spans = sample_audit.spans(str(samples))
    after = [i for i, (_, t0, _) in enumerate(spans) if t0 > killed]
    healed = after[0]  # the first group after the loss, at whatever size
    healed_at, healed_end = sample_audit.healed(sample_audit.step_times(str(samples)), killed) or (None, None)
    grown = next((i for i in after if spans[i][0] == NODES), None)
    # None: the node was back before the survivors had re-formed without it, or not before the end.
    pause = round(spans[grown][1] - spans[grown - 1][2], 2) if grown is not None and grown > healed else None
    lost, repeated = sample_audit.lost_and_repeated(str(samples), SIZE, EPOCHS)
    return {
        "mode": mode,
        "exit": run.returncode,
        "heal_s": healed_end and round(healed_end - killed, 2),
        "healed_at": healed_at,
        "join_pause_s": pause,
        "workers_kept": kept,
        "worlds": [w for w, _, _ in spans],
        "lost": lost,
        "repeated": repeated,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node", type=int, default=1, choices=range(NODES), help="the node to lose (0..2)")
    parser.add_argument("--kill-after", type=int, default=40, help="steps trained before the loss")
    parser.add_argument("--backoff", type=int, default=20, help="restartBackoffSeconds: when the node comes back")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="in-place-bench-") as tmp:
        for mode in MODES:
            results.append(run_one(pathlib.Path(tmp) / mode, mode, args.node, args.kill_after, args.backoff))
            print(json.dumps(results[-1]), flush=True)
    by = {r["mode"]: r for r in results}
    for key in ("heal_s", "join_pause_s"):
        if by["restart"][key] is None or by["in-place"][key] is None:
            continue
        ratio = by["restart"][key] / max(by["in-place"][key], 1e-3)
        print(f"{key}: in place {by['in-place'][key]} s, restart {by['restart'][key]} s: {ratio:.1f}x", flush=True)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=2))
    return 0 if all(r["exit"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
