"""Time from Ctrl-C of `ddpjob run` to its exit, mid-training (2 nodes x 2 processes, the
built-in trainer, gloo on CPU), with and without a checkpoint to save on the way out.

In the same run, each case again with the stop path's quick exit turned off (a
sitecustomize on PYTHONPATH puts `sys.exit` back in place of
`ddpjob_trainer.quick_exit.exit_now`): the trainer's ranks and torchrun then finalize
their interpreters as before, and the ratio is what the quick exit saves.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPEATS = 3
TRAINING = "epoch 2/1000 done"  # the job is training: interrupt it here
SLOW_EXIT = "import sys\nimport ddpjob_trainer.quick_exit as q\nq.exit_now = lambda code: sys.exit(code)\n"


def stop_seconds(tmp: Path, checkpoint: bool, quick: bool) -> float:
    job = {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {"name": "stop"},
        "spec": {
            "nodes": 2,
            "nprocPerNode": 2,
            "image": "local",
            "command": ["ddpjob-launch"],
            "args": ["ddpjob-train", "--model", "mlp", "--data", "synthetic", "--epochs", "1000"],
            **({"checkpoint": {"claimName": "c"}} if checkpoint else {}),
        },
    }
    path = tmp / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    if not quick:
        (tmp / "slow").mkdir(exist_ok=True)
        (tmp / "slow" / "sitecustomize.py").write_text(SLOW_EXIT)
        env["PYTHONPATH"] = str(tmp / "slow")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ddpjob.cli", "run", "--fresh", str(path)],
        cwd=tmp,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None  # stdout=PIPE
    try:
        deadline = time.monotonic() + 300
        for line in proc.stdout:
            if TRAINING in line:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the job did not start training within 300 s")
        start = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.stdout.read()
        proc.wait(timeout=60)
        return time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()


def main() -> None:
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    for checkpoint in (False, True):
        times: dict[bool, list[float]] = {True: [], False: []}
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(REPEATS):
                for quick in (True, False):  # interleaved: both see the same load
                    times[quick].append(stop_seconds(Path(tmp), checkpoint, quick))
        fast, slow = (statistics.median(times[q]) for q in (True, False))
        what = "with a checkpoint to save" if checkpoint else "no checkpoint"
        print(
            f"Ctrl-C -> exit, {what}: median {fast:.2f} s over {REPEATS} runs "
            f"({', '.join(f'{t:.2f}' for t in times[True])}); without the quick exit {slow:.2f} s "
            f"({', '.join(f'{t:.2f}' for t in times[False])}); ratio {slow / fast:.1f}x"
        )


if __name__ == "__main__":
    main()
