"""What the GPU tier's tests share: whether a CUDA GPU is here, and a job file for `ddpjob run`.

The tier runs where a GPU is (`make test-gpu`); elsewhere every test in it is skipped
with the reason, as any test that needs a missing external thing is."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

BIN = Path(sys.executable).parent


def cuda_gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


GPUS = cuda_gpus()
needs_gpu = pytest.mark.skipif(
    GPUS == 0,
    reason="no CUDA GPU visible to torch (torch.cuda.is_available() is False): "
    "the GPU tier runs on a GPU machine with `make test-gpu`",
)
needs_two_gpus = pytest.mark.skipif(GPUS < 2, reason=f"needs 2 CUDA GPUs, {GPUS} visible")
needs_triton = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason="torch.compile on CUDA needs triton, which is not installed"
)


def env(**extra: object) -> dict[str, str]:
    """This interpreter's tools first on PATH; no contract variable from the caller's shell."""
    out = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PET_", "DDPJOB_"))
        and k not in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "NODE_RANK", "NNODES")
    }
    out["PATH"] = f"{BIN}{os.pathsep}{out.get('PATH', '')}"
    out.update({k: str(v) for k, v in extra.items()})
    return out


def write_job(
    tmp_path: Path, name: str, command: list[str], *, nodes: int = 1, nproc: int = 1, gpus: int = 1, **spec: object
) -> Path:
    body = {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {"name": name},
        "spec": {
            "nodes": nodes,
            "nprocPerNode": nproc,
            "gpusPerNode": gpus,
            "image": "local",
            "command": command,
            "restartPolicy": "Never",
            **spec,
        },
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def ddpjob_run(tmp_path: Path, *args: str, timeout: float = 300) -> tuple[int, str, dict]:
    """`ddpjob run ARGS` in tmp_path: exit code, output, and the final status it printed."""
    r = subprocess.run(
        [sys.executable, "-m", "ddpjob.cli", "run", "-o", "yaml", *args],
        cwd=tmp_path,
        env=env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    output = r.stdout + r.stderr
    docs = r.stdout.split("\n---\n")
    status = (yaml.safe_load(docs[-1]) or {}).get("status", {}) if len(docs) > 1 else {}
    return r.returncode, output, status


def train(
    tmp_path: Path, *args: str, nproc: int = 1, timeout: float = 300, **extra_env: object
) -> subprocess.CompletedProcess:
    """ddpjob-launch ddpjob-train on this machine (one node), metrics into tmp_path."""
    from ddpjob.local.ports import free_port

    cmd = [str(BIN / "ddpjob-launch"), "ddpjob-train", "--metrics-file", str(tmp_path / "metrics.jsonl"), *args]
    contract = env(
        NNODES=1, NODE_RANK=0, NPROC_PER_NODE=nproc, MASTER_ADDR="127.0.0.1", MASTER_PORT=free_port(), **extra_env
    )
    return subprocess.run(cmd, env=contract, capture_output=True, text=True, timeout=timeout, cwd=tmp_path)
