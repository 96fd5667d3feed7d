"""The processes of a `ddpjob run` job for tests and benchmarks: `ddpjob run` itself
(`started`), and one node's, found by their contract environment (DDPJOB_NAME and
NODE_RANK, and DDPJOB_NAMESPACE where given: a process kubelet's Pods are processes on
this host too): what a test kills to lose a node, and whose PIDs it compares to tell a
resize in place (the same workers) from a restart. Linux /proc only; a process that ends
while it is read is left out."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def started(workdir: Path, job_file: Path, log_file: Path) -> Iterator[subprocess.Popen]:
    """`ddpjob run JOB_FILE` in `workdir`, its output unbuffered into `log_file` (read while
    it runs); killed on the way out if it still runs."""
    with open(log_file, "w") as log:
        run = subprocess.Popen(
            [sys.executable, "-m", "ddpjob.cli", "run", "-o", "yaml", str(job_file)],  # ends with its status
            cwd=workdir,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            yield run
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()


def of_node(job_name: str, node_rank: int, namespace: str | None = None) -> list[int]:
    """Every process of one node of this job (in `namespace`, on a cluster)."""
    marks = [f"DDPJOB_NAME={job_name}".encode(), f"NODE_RANK={node_rank}".encode()]
    if namespace is not None:
        marks.append(f"DDPJOB_NAMESPACE={namespace}".encode())
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if all(m in env for m in marks):
                pids.append(int(entry))
    return sorted(pids)


def _matching(job_name: str, ranks, keep, namespace: str | None) -> list[int]:
    found = []
    for pid in sorted(pid for r in ranks for pid in of_node(job_name, r, namespace)):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if keep(cmd):
            found.append(pid)
    return found


def launchers(job_name: str, ranks, namespace: str | None = None) -> list[int]:
    """The `ddpjob-launch` process (the "container") of each of these nodes."""
    return _matching(job_name, ranks, lambda cmd: b"ddpjob-launch" in cmd, namespace)


def workers(job_name: str, ranks, namespace: str | None = None) -> list[int]:
    """The training processes (torchrun's workers running ddpjob-train) of these nodes."""
    return _matching(job_name, ranks, lambda cmd: b"ddpjob_trainer.train" in cmd and b"torchrun" not in cmd, namespace)
