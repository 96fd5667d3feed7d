"""Weak scaling of ddpjob-train: 1 -> 2 processes (gloo, CPU), and 1 -> all GPUs (nccl)
when there are at least two.

Weak scaling: every process keeps the default per-process batch (64) and the same
number of steps, so n processes do n times the work. efficiency(n) = throughput(n) /
(n x throughput(1)). Jobs start through ddpjob-launch with the contract env set by
hand, exactly as in a Pod. On CPU every process gets one thread (OMP_NUM_THREADS=1),
also for n = 1, so that each process stands for one core.

A VM's vCPUs are not always independent cores, so the script also measures the
hardware's own ceiling: n copies of the same training with no communication at all,
side by side. DDP cannot beat that; "vs hardware" is efficiency / ceiling.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from ddpjob.local.ports import free_port

EPOCHS = 3  # the first one is warm-up; the median of the others is reported
# Per-process samples per epoch: a few seconds per epoch on one CPU core.
PER_PROCESS = {"mlp": 8192, "cnn": 1536}


def base_env(cpu: bool) -> dict:
    drop = (
        "MASTER_ADDR",
        "MASTER_PORT",
        "NNODES",
        "NODE_RANK",
        "NPROC_PER_NODE",
        "WORLD_SIZE",
        "RANK",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "DDPJOB_CHECKPOINT_DIR",
    )
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("PET_")}
    if cpu:
        env["OMP_NUM_THREADS"] = "1"
    return env


def exe(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        sys.exit(f"{name} is not on PATH (run through `make bench`)")
    return path


def throughput(metrics: str) -> float:
    with open(metrics) as f:
        records = [json.loads(line) for line in f]
    return statistics.median(r["samples_per_s"] for r in records if r["event"] == "epoch" and r["epoch"] > 1)


def train_args(model: str, samples: int, metrics: str, batch: int = 64) -> list[str]:
    return [
        "--model",
        model,
        "--batch-size",
        str(batch),
        "--data",
        "synthetic",
        "--synthetic-size",
        str(samples),
        "--epochs",
        str(EPOCHS),
        "--eval-every",
        "0",
        "--log-every",
        "100000",
        "--metrics-file",
        metrics,
    ]


def ddp(model: str, nproc: int, cpu: bool, batch: int = 64) -> float:
    """Global samples/s of one node running nproc DDP processes."""
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        port = str(free_port())
        env = base_env(cpu) | {
            "NNODES": "1",
            "NODE_RANK": "0",
            "NPROC_PER_NODE": str(nproc),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
            "WORLD_SIZE": str(nproc),
        }
        subprocess.run(
            [
                exe("ddpjob-launch"),
                "ddpjob-train",
                *train_args(model, PER_PROCESS[model] * nproc * batch // 64, metrics, batch),
            ],
            env=env,
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        )
        return throughput(metrics)


def independent(model: str, n: int, batch: int = 64) -> float:
    """Aggregate samples/s of n single-process runs side by side: the hardware ceiling."""
    with tempfile.TemporaryDirectory() as tmp:
        files = [os.path.join(tmp, f"m{i}.jsonl") for i in range(n)]
        procs = [
            subprocess.Popen(
                [
                    exe("ddpjob-train"),
                    "--strategy",
                    "single",
                    *train_args(model, PER_PROCESS[model] * batch // 64, f, batch),
                ],
                env=base_env(True),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for f in files
        ]
        if any(p.wait(timeout=600) for p in procs):
            sys.exit("an independent run failed")
        return sum(throughput(f) for f in files)


def main() -> None:
    import torch

    gpus = torch.cuda.device_count()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            cpu_model = next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    except (OSError, StopIteration):
        cpu_model = "unknown CPU"
    print(f"machine: {os.cpu_count()} CPU(s) ({cpu_model}), {gpus} GPU(s), torch {torch.__version__}")
    # Other work on the machine skews everything below; say how busy it was.
    print("load average before: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    n = 2
    print(f"CPU, gloo, weak scaling 1 -> {n} processes, batch 64 per process, 1 thread per process")
    # The MLP sends all its 2.1 MB of gradients for only ~3 ms of compute per step (the
    # worst case for data parallelism); the CNN has 100x fewer parameters per FLOP; the
    # last row shows how a larger per-process batch amortises the MLP's all-reduce.
    for model, batch in (("mlp", 64), ("cnn", 64), ("mlp", 256)):
        one = ddp(model, 1, cpu=True, batch=batch)
        many = ddp(model, n, cpu=True, batch=batch)
        ceiling = independent(model, n, batch) / (n * one)
        eff = many / (n * one)
        print(
            f"  {model} batch {batch}: 1 proc {one:8.0f} samples/s | {n} procs {many:8.0f} samples/s | "
            f"efficiency {eff:6.1%} | hardware ceiling {ceiling:6.1%} | vs hardware {eff / ceiling:6.1%}"
        )
    print("  goal: efficiency >= 85% on CPU at the default batch")
    if gpus >= 2:
        print(f"GPU, nccl, weak scaling 1 -> {gpus} processes, batch 64 per process")
        for model in ("mlp", "resnet18"):
            PER_PROCESS.setdefault(model, 8192)
            one, many = ddp(model, 1, cpu=False), ddp(model, gpus, cpu=False)
            print(
                f"  {model}: 1 GPU {one:9.0f} samples/s | {gpus} GPUs {many:9.0f} samples/s | "
                f"efficiency {many / (gpus * one):6.1%}"
            )
    else:
        print("GPU: fewer than 2 GPUs, GPU scaling skipped")


if __name__ == "__main__":
    main()
    print("load average after: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
