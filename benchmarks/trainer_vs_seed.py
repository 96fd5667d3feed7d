"""ddpjob-train vs the PyTorch DDP tutorial's loop, in one run on one machine.

The seed loop below is the common tutorial written out literally: a Dataset returning
PIL images through ToTensor() and Normalize((0.1307,), (0.3081,)), a DataLoader with a
DistributedSampler and batch 64, the 784-512-256-10 MLP under DDP, Adam 1e-3, and
loss.item() every step. Both train on the same MNIST-shaped synthetic data, one
process, on the GPU when there is one. Runs alternate (seed, ours, seed, ours, ...) and
the median is reported, because a shared 2-core VM is noisy.

Goal: >= 1.5x on a 2-core CPU, >= 10x on one GPU with no flag (the default, which
captures the step as a CUDA graph where it can); `--compile` never slower than eager.
Each way ddpjob-train can run the step is measured against the seed loop of the same
run: on a GPU the default, eager (`--no-cuda-graph`), `--compile` and `--cuda-graph`; on
a CPU eager (the default there) and `--compile`.

  trainer_vs_seed.py            # 3 alternating runs, medians at the end (`make bench`)
  trainer_vs_seed.py --quick    # 1 run, each row printed complete as it is measured (`make bench-gpu`)
  trainer_vs_seed.py --smoke    # a tiny CPU run of this script's logic, no figures worth keeping
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from ddpjob.local.ports import free_port

SAMPLES = 16384  # per epoch, both loops
BATCH = 64
REPEATS = 3
SEED_STEPS, SEED_WARMUP = 200, 20
EPOCHS = 3  # of ddpjob-train: the figure is the median of the epochs after the first
CHOSEN: list[str] = []  # --compile's choice in each run


def seed_loop(samples: int, steps: int, warmup: int) -> float:
    """The tutorial loop. Returns samples/s over `steps` steps after `warmup`."""
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from PIL import Image
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, Dataset, DistributedSampler
    from torchvision import transforms

    class MNISTLike(Dataset):
        def __init__(self, n):
            g = torch.Generator().manual_seed(0)
            self.images = torch.randint(0, 256, (n, 28, 28), dtype=torch.uint8, generator=g).numpy()
            self.labels = torch.randint(0, 10, (n,), generator=g).tolist()
            self.transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])

        def __len__(self):
            return len(self.labels)

        def __getitem__(self, i):
            return self.transform(Image.fromarray(self.images[i], mode="L")), self.labels[i]

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo", rank=0, world_size=1)
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    model: nn.Module = nn.Sequential(
        nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10)
    ).to(device)
    model = DDP(model, device_ids=[0] if cuda else None)
    dataset = MNISTLike(samples)
    sampler: DistributedSampler[int] = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=BATCH, sampler=sampler)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    step, start, epoch = 0, None, 0
    while step < warmup + steps:
        sampler.set_epoch(epoch)
        for data, target in loader:
            if step == warmup:
                start = time.perf_counter()
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(data), target)
            loss.backward()
            optimizer.step()
            loss.item()
            step += 1
            if step == warmup + steps:
                break
        epoch += 1
    assert start is not None  # the warm-up ended
    elapsed = time.perf_counter() - start
    dist.destroy_process_group()
    return steps * BATCH / elapsed


def clean_env() -> dict:
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
    return {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("PET_")}


def run_seed(samples: int = SAMPLES, steps: int = SEED_STEPS, warmup: int = SEED_WARMUP) -> float:
    out = subprocess.run(
        [sys.executable, __file__, "--seed-loop", str(samples), str(steps), str(warmup)],
        env=clean_env(),
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    return float(out.strip().splitlines()[-1])


def run_ours(*flags: str, samples: int = SAMPLES, epochs: int = EPOCHS) -> dict:
    """ddpjob-train as a user runs it: the median throughput of its epochs after the first
    (warm-up, the graph's capture, torch.compile's compilation), its peak GPU memory, and
    what it said about its step (the default's one line) and `--compile`'s choice."""
    exe = shutil.which("ddpjob-train")
    if exe is None:
        sys.exit("ddpjob-train is not on PATH (run through `make bench` or `make bench-gpu`)")
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        out = subprocess.run(
            [
                exe,
                "--model",
                "mlp",
                "--data",
                "synthetic",
                "--batch-size",
                str(BATCH),
                "--synthetic-size",
                str(samples),
                "--epochs",
                str(epochs),
                "--eval-every",
                "0",
                "--log-every",
                "100000",
                "--metrics-file",
                metrics,
                *flags,
            ],
            env=clean_env(),
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        ).stdout
        with open(metrics) as f:
            records = [json.loads(line) for line in f]
    final = next(r for r in records if r["event"] == "final")
    if "compile" in final:  # which model --compile kept after timing both (compile_choice.py)
        CHOSEN.append(final["compile"])
    epochs_ = [r for r in records if r["event"] == "epoch"]
    return {
        "samples_per_s": statistics.median(r["samples_per_s"] for r in epochs_[1:] or epochs_),
        "peak_gpu_mib": max((r.get("peak_gpu_mib", 0) for r in epochs_), default=0),
        "step": next((line for line in out.splitlines() if line.startswith("step: ")), ""),
        "compile": final.get("compile"),
    }


def machine() -> str:
    import torch

    model = platform.processor() or ""
    with contextlib.suppress(OSError, StopIteration), open("/proc/cpuinfo") as cpuinfo:
        model = next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return f"{os.cpu_count()} CPU(s) ({model}), {gpu}, torch {torch.__version__}, python {platform.python_version()}"


def variants(device: str, smoke: bool = False) -> dict[str, tuple[str, ...]]:
    """ddpjob-train's ways to run the step. On a GPU: the default (no flag: a CUDA graph
    where eligible), eager, compiled, and the graph asked for; on a CPU eager is the
    default. Compiled only where torch.compile can build (triton on a GPU), and not in
    --smoke (compiling takes longer than the rest of the smoke run)."""
    import importlib.util

    out: dict[str, tuple[str, ...]] = (
        {"default": (), "eager": ("--no-cuda-graph",)} if device == "cuda" else {"eager": ()}
    )
    if not smoke and (device == "cpu" or importlib.util.find_spec("triton") is not None):
        out["--compile"] = ("--compile",)
    if device == "cuda":
        out["--cuda-graph"] = ("--cuda-graph",)
    return out


def row(name: str, r: dict, seed: float, eager: float | None, goal: float | None) -> str:
    """One measured way, complete on its own line: throughput, against the seed loop (and
    eager), peak memory, what the trainer said about its step."""
    rate = r["samples_per_s"]
    line = f"ddpjob-train {name:<12}: {rate:9.0f} samples/s, {rate / seed:5.2f}x the seed loop"
    if goal is not None:
        line += f" (goal >= {goal}x: {'met' if rate / seed >= goal else 'NOT met'})"
    if eager is not None and name != "eager":
        line += f", {rate / eager:4.2f}x eager"
    if r["compile"]:
        line += f", kept the {r['compile']} model"
    if r["peak_gpu_mib"]:
        line += f", peak {r['peak_gpu_mib']:.0f} MiB"
    return line + (f"; said: {r['step']}" if r["step"] else "")


def quick(device: str, smoke: bool) -> None:
    """Each row printed as soon as it is measured, complete on its own (`make bench-gpu`)."""
    samples, steps, warmup, epochs = (1024, 20, 5, 2) if smoke else (SAMPLES, SEED_STEPS, SEED_WARMUP, EPOCHS)
    ways = variants(device, smoke)
    print(f"device: {device}; MLP 784-512-256-10, batch {BATCH}, one process, one run of each way", flush=True)
    seed = run_seed(samples, steps, warmup)
    print(f"seed tutorial loop       : {seed:9.0f} samples/s", flush=True)
    eager = None
    for name, flags in sorted(ways.items(), key=lambda w: w[0] != "eager"):  # eager first: the others' reference
        r = run_ours(*flags, samples=samples, epochs=epochs)
        eager = r["samples_per_s"] if name == "eager" else eager
        goal = (10.0 if name == "default" else None) if device == "cuda" else (1.5 if name == "eager" else None)
        print(row(name, r, seed, eager, goal), flush=True)


def main() -> None:
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"machine: {machine()}")
    # Other work on the machine skews everything below; say how busy it was.
    print("load average before: " + " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    if "--quick" in sys.argv or "--smoke" in sys.argv:
        quick(device, smoke="--smoke" in sys.argv)
        return
    print(f"device: {device}; MLP 784-512-256-10, batch {BATCH}, one process, {REPEATS} alternating runs each")
    ways = variants(device)
    runs: dict[str, list[float]] = {"seed loop": [], **{name: [] for name in ways}}
    for i in range(REPEATS):
        runs["seed loop"].append(run_seed())
        for name, flags in ways.items():
            runs[name].append(run_ours(*flags)["samples_per_s"])
        print(
            f"  run {i + 1}: " + "   ".join(f"{name} {r[-1]:9.0f}" for name, r in runs.items()) + " samples/s",
            flush=True,
        )
    median = {name: statistics.median(r) for name, r in runs.items()}
    seed, goal = median["seed loop"], 10.0 if device == "cuda" else 1.5
    print(f"seed tutorial loop : {seed:9.0f} samples/s (median)")
    for name in ways:
        print(
            f"ddpjob-train {name:<12}: {median[name]:9.0f} samples/s (median), {median[name] / seed:.2f}x the seed loop"
        )
    judged = "default" if device == "cuda" else "eager"  # what a user gets with no flag
    print(
        f"ratio              : {median[judged] / seed:.2f}x (with no flag; goal >= {goal}x on {device}: "
        f"{'met' if median[judged] / seed >= goal else 'NOT met'})"
    )
    if "--compile" in median:
        ratio = median["--compile"] / median["eager"]
        print(
            f"--compile / eager  : {ratio:.2f} (goal: never slower, >= 1.0 within noise); "
            f"the model --compile kept in each run: {', '.join(CHOSEN)}"
        )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--seed-loop"]:
        print(seed_loop(*map(int, sys.argv[2:5])))
    else:
        main()
        print("load average after: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
