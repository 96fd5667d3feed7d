"""Shared helpers for the trainer tests: fixture data files, free ports, subprocess runs."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import torch

from ddpjob.local.ports import free_port
from tests.support.deadlines import RUN

BIN = Path(sys.executable).parent
# Contract variables a developer's shell (or a Pod) may carry into the tests.
CONTRACT = (
    "MASTER_ADDR",
    "MASTER_PORT",
    "NNODES",
    "NODE_RANK",
    "NPROC_PER_NODE",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "DDPJOB_RESTART_COUNT",
    "DDPJOB_BACKEND",
    "DDPJOB_CHECKPOINT_DIR",
    "DDPJOB_NAME",
    "DDPJOB_NAMESPACE",
    "OMP_NUM_THREADS",
    "DDPJOB_TEST_KILL_AFTER_EPOCH",
    "DDPJOB_PROGRESS_FILE",
    "DDPJOB_PROGRESS_PORT",
    "DDPJOB_PROGRESS_HOST",
    "DDPJOB_TEST_HANG_AT_STEP",
    "DDPJOB_TEST_HANG_RANK",
    "DDPJOB_COLLECTIVE_TIMEOUT_SECONDS",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "DDPJOB_NODE_ADDRESS",
    "DDPJOB_NOTICE_TOKEN",
    "DDPJOB_RESIZE",
)


def clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in CONTRACT and not k.startswith("PET_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update({k: str(v) for k, v in extra.items()})
    return env


def contract(nnodes=1, node_rank=0, nproc=2, port=None, **extra) -> dict:
    """The env contract as the operator / local runner would set it (docs/design.md)."""
    port = port or free_port()
    env = dict(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=port,
        NNODES=nnodes,
        NODE_RANK=node_rank,
        NPROC_PER_NODE=nproc,
        WORLD_SIZE=nnodes * nproc,
    )
    env.update({f"PET_{k}": v for k, v in list(env.items()) if k != "WORLD_SIZE"})
    if nproc == 1:
        env.update(RANK=node_rank, LOCAL_RANK=0, LOCAL_WORLD_SIZE=1)
    env.update(extra)
    return clean_env(**env)


def run(cmd: list[str], env: dict, timeout: float = RUN, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=cwd)


def launch(args: list[str], env: dict, timeout: float = RUN) -> subprocess.CompletedProcess:
    return run([str(BIN / "ddpjob-launch"), *args], env, timeout)


def train(args: list[str], env: dict | None = None, timeout: float = RUN) -> subprocess.CompletedProcess:
    return run([str(BIN / "ddpjob-train"), *args], env or clean_env(), timeout)


def metrics(path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def events(path, kind: str) -> list[dict]:
    return [r for r in metrics(path) if r["event"] == kind]


def write_mnist(root: Path, n_train: int = 512, n_test: int = 128) -> Path:
    """Small IDX files in torchvision's layout (ROOT/MNIST/raw), with a learnable signal:
    each class lights up its own band of rows."""
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    g = torch.Generator().manual_seed(0)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        labels = torch.randint(0, 10, (n,), generator=g, dtype=torch.uint8)
        images = torch.randint(0, 60, (n, 28, 28), generator=g, dtype=torch.uint8)
        for i, label in enumerate(labels.tolist()):
            images[i, 2 * label + 3 : 2 * label + 6, 4:24] = 255
        (raw / f"{prefix}-images-idx3-ubyte").write_bytes(
            struct.pack(">IIII", 2051, n, 28, 28) + images.numpy().tobytes()
        )
        (raw / f"{prefix}-labels-idx1-ubyte").write_bytes(struct.pack(">II", 2049, n) + labels.numpy().tobytes())
    return root


def write_imagefolder(root: Path, per_class: int = 12, size: int = 20, ext: str = "png") -> Path:
    """ROOT/{train,val}/{red,green,blue}/*.EXT: colour is the class."""
    from PIL import Image

    colours = {"red": (220, 30, 30), "green": (30, 200, 30), "blue": (30, 30, 220)}
    for split, count in (("train", per_class), ("val", per_class // 2)):
        for name, rgb in colours.items():
            d = root / split / name
            d.mkdir(parents=True)
            for i in range(count):
                jitter = tuple(max(0, min(255, c + (i * 7) % 31 - 15)) for c in rgb)
                Image.new("RGB", (size + i % 3, size), jitter).save(d / f"{i}.{ext}")
    return root


def final_weights(checkpoint_dir) -> dict:
    """The model state of the newest checkpoint in a directory."""
    from ddpjob_trainer import checkpoint

    newest = checkpoint.newest(str(checkpoint_dir))
    assert newest is not None, f"no checkpoint in {checkpoint_dir}"
    return newest[1]["model"]
