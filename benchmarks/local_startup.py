"""Time from `ddpjob run` to the first all-reduce of a 2 x 1 job (goal: under 5 s here).

In the same run, the same two processes started by hand with the same env (no ddpjob)
give the floor (mostly `import torch`); the ratio is ddpjob's share of the start-up.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PROBE = ROOT / "tests" / "local" / "scripts" / "allreduce_probe.py"
REPEATS = 5


def first_allreduce(out: Path) -> float:
    return min(json.loads(p.read_text())["t"] for p in out.glob("rank*.json"))


def via_ddpjob(tmp: Path) -> float:
    out = tmp / "ddpjob"
    out.mkdir()
    job = {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {"name": "bench"},
        "spec": {
            "nodes": 2,
            "nprocPerNode": 1,
            "image": "local",
            "command": [sys.executable, str(PROBE)],
            "env": [{"name": "PROBE_DIR", "value": str(out)}],
        },
    }
    path = tmp / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    start = time.time()
    subprocess.run(
        [sys.executable, "-m", "ddpjob.cli", "run", str(path)], cwd=tmp, check=True, stdout=subprocess.DEVNULL
    )
    return first_allreduce(out) - start


def by_hand(tmp: Path) -> float:
    out = tmp / "hand"
    out.mkdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.time()
    procs = [
        subprocess.Popen(
            [sys.executable, str(PROBE)],
            env={
                **os.environ,
                "PROBE_DIR": str(out),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
                "RANK": str(r),
                "WORLD_SIZE": "2",
                "LOCAL_RANK": "0",
            },
        )
        for r in range(2)
    ]
    for p in procs:
        assert p.wait() == 0
    return first_allreduce(out) - start


def main() -> None:
    ddp, hand = [], []
    for _ in range(REPEATS):
        with tempfile.TemporaryDirectory() as d:
            ddp.append(via_ddpjob(Path(d)))
        with tempfile.TemporaryDirectory() as d:
            hand.append(by_hand(Path(d)))
    mine, theirs = statistics.median(ddp), statistics.median(hand)
    print(
        f"ddpjob run -> first all-reduce (2 x 1, gloo): median {mine:.2f} s over {REPEATS} runs "
        f"({', '.join(f'{x:.2f}' for x in ddp)}); goal < 5 s: {'met' if mine < 5 else 'MISSED'}"
    )
    print(f"same processes started by hand:              median {theirs:.2f} s")
    print(f"ratio ddpjob / by hand: {mine / theirs:.2f}x")


if __name__ == "__main__":
    main()
