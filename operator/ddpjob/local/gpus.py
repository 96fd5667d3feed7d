"""GPUs for `ddpjob run`: how many this machine has, whether a job fits, and the job
made to run on CPU (`ddpjob run --cpu`).

Checked before any process starts: a GPU job on a machine without GPUs would otherwise
start every process and fail each one with the same error a minute later. No torch here
(the CLI side never imports it): NVIDIA's driver makes one /dev/nvidiaN per GPU (where it
does not, as under WSL, `nvidia-smi -L` lists them), and CUDA_VISIBLE_DEVICES narrows
what a process may use, as it would for the trainer.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Mapping

from ddpjob.api.spec import DDPJob


def visible_gpus(dev: Path = Path("/dev"), env: Mapping[str, str] | None = None) -> list[str]:
    """The GPU ids a process started here may use, in order."""
    env = os.environ if env is None else env
    try:
        present = sorted(int(m.group(1)) for p in dev.iterdir() if (m := re.fullmatch(r"nvidia(\d+)", p.name)))
    except OSError:
        present = []
    ids = [str(i) for i in present] or smi_gpus(env)
    mask = env.get("CUDA_VISIBLE_DEVICES")
    if mask is None:
        return ids
    # CUDA stops at the first invalid entry ("-1" hides every GPU); UUIDs name GPUs too.
    chosen = []
    for entry in (e.strip() for e in mask.split(",")):
        if entry.startswith(("GPU-", "MIG-")) and ids:
            chosen.append(entry)
        elif entry.isdigit() and entry in ids:
            chosen.append(entry)
        else:
            break
    return chosen


def smi_gpus(env: Mapping[str, str]) -> list[str]:
    """GPU indices from `nvidia-smi -L` ("GPU 0: ..."), or none without it."""
    smi = shutil.which("nvidia-smi", path=env.get("PATH", os.defpath))
    if smi is None:
        return []
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return re.findall(r"(?m)^GPU (\d+):", out)


def gpu_error(job: DDPJob, available: list[str]) -> str | None:
    """One line when the job asks for more GPUs than this machine has, else None."""
    wanted = job.nodes * job.gpus_per_node
    if wanted <= len(available):
        return None
    return (f"spec.gpusPerNode: the job asks for {job.gpus_per_node} GPU(s) on each of {job.nodes} node(s) "
            f"({wanted} in all) and this machine has {len(available)}; run it on CPU with "
            f"`ddpjob run --cpu` (gloo, {job.nproc_per_node} process(es) per node)")


def on_cpu(job: DDPJob) -> DDPJob:
    """The same job, world size included, without GPUs: gloo, no GPU requests."""
    return dataclasses.replace(job, gpus_per_node=0, backend="gloo")


def devices_for_node(job: DDPJob, rank: int, available: list[str]) -> dict[str, str]:
    """CUDA_VISIBLE_DEVICES for one node, so two "nodes" on this machine never share a
    GPU (each would otherwise start at cuda:0, and NCCL refuses duplicate GPUs)."""
    if not job.gpus_per_node:
        return {}
    first = rank * job.gpus_per_node
    return {"CUDA_VISIBLE_DEVICES": ",".join(available[first:first + job.gpus_per_node])}
