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
from collections.abc import Mapping
from pathlib import Path

from ddpjob.api.errors import FieldError
from ddpjob.api.spec import DDPJob
from ddpjob.text import plural


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
        if (entry.startswith(("GPU-", "MIG-")) and ids) or (entry.isdigit() and entry in ids):
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
    blockers = cpu_blockers(job)
    # Suggest --cpu only where it would run: the ResNet example's --sync-bn would fail on
    # every rank a minute later.
    hint = (
        f"`ddpjob run --cpu` cannot run it as written: {blockers[0]}"
        if blockers
        else f"run it on CPU with `ddpjob run --cpu` (gloo, {plural(job.nproc_per_node, 'process')} per node)"
    )
    return (
        f"spec.gpusPerNode: the job asks for {plural(job.gpus_per_node, 'GPU')} on each of "
        f"{plural(job.nodes, 'node')} ({wanted} in all) and this machine has {len(available)}; {hint}"
    )


# What the built-in trainer (or any program) is asked for that needs CUDA: the argument,
# and the fix. `--cpu` refuses these before anything starts, naming where each is.
_CUDA_ONLY = (
    (("--sync-bn",), "--sync-bn needs CUDA devices (SyncBatchNorm); remove it to run on CPU"),
    (("--amp", "fp16"), "--amp fp16 needs a CUDA device; use --amp bf16 on CPU"),
    (("nccl",), "nccl needs GPUs; use gloo on CPU"),
)


def cpu_blockers(job: DDPJob) -> list[FieldError]:
    """One message per argument or env value of the job that cannot run on CPU, each
    naming its field (spec.args[3]: ...)."""
    found: list[FieldError] = []
    for field, argv in (("spec.command", job.command or ()), ("spec.args", job.args)):
        words = [str(w) for w in argv]
        for i, word in enumerate(words):
            # `--amp fp16` and `--amp=fp16` alike; `--backend nccl` and `--backend=nccl`.
            parts = tuple(word.split("=", 1)) if word.startswith("--") and "=" in word else (word,)
            for pattern, message in _CUDA_ONLY:
                if (
                    parts == pattern
                    or (
                        len(pattern) == 2 and parts == pattern[:1] and i + 1 < len(words) and words[i + 1] == pattern[1]
                    )
                    or (pattern == ("nccl",) and parts[-1].lower() == "nccl")
                ):
                    found.append(FieldError(f"{field}[{i}]", message))
    for i, entry in enumerate(job.env):
        if str(entry.get("value", "")).strip().lower() == "nccl":
            found.append(FieldError(f"spec.env[{i}].value", _CUDA_ONLY[2][1]))
    return found


def on_cpu(job: DDPJob) -> DDPJob:
    """The same job, world size included, without GPUs: gloo, no GPU requests."""
    return dataclasses.replace(job, gpus_per_node=0, backend="gloo")


def devices_for_node(job: DDPJob, rank: int, available: list[str]) -> dict[str, str]:
    """CUDA_VISIBLE_DEVICES for one node, so two "nodes" on this machine never share a
    GPU (each would otherwise start at cuda:0, and NCCL refuses duplicate GPUs)."""
    if not job.gpus_per_node:
        return {}
    first = rank * job.gpus_per_node
    return {"CUDA_VISIBLE_DEVICES": ",".join(available[first : first + job.gpus_per_node])}
