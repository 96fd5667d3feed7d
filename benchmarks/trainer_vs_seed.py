"""ddpjob-train vs the PyTorch DDP tutorial's loop, in one run on one machine.

The seed loop below is the common tutorial written out literally: a Dataset returning
PIL images through ToTensor() and Normalize((0.1307,), (0.3081,)), a DataLoader with a
DistributedSampler and batch 64, the 784-512-256-10 MLP under DDP, Adam 1e-3, and
loss.item() every step. Both train on the same MNIST-shaped synthetic data, one
process, on the GPU when there is one. Runs alternate (seed, ours, seed, ours, ...) and
the median is reported, because a shared 2-core VM is noisy.

Goal: >= 1.5x on a 2-core CPU, >= 10x on one GPU; `--compile` never slower than eager. Each
way ddpjob-train can run the step is measured (eager, `--compile`, and on a GPU
`--cuda-graph`), each against the seed loop of the same run.
"""

from __future__ import annotations

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
CHOSEN: list[str] = []  # --compile's choice in each run


def seed_loop() -> float:
    """The tutorial loop. Returns samples/s over SEED_STEPS steps after a warm-up."""
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
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                          nn.Linear(256, 10)).to(device)
    model = DDP(model, device_ids=[0] if cuda else None)
    dataset = MNISTLike(SAMPLES)
    loader = DataLoader(dataset, batch_size=BATCH, sampler=DistributedSampler(dataset))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    step, start, epoch = 0, None, 0
    while step < SEED_WARMUP + SEED_STEPS:
        loader.sampler.set_epoch(epoch)
        for data, target in loader:
            if step == SEED_WARMUP:
                start = time.perf_counter()
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(data), target)
            loss.backward()
            optimizer.step()
            loss.item()
            step += 1
            if step == SEED_WARMUP + SEED_STEPS:
                break
        epoch += 1
    elapsed = time.perf_counter() - start
    dist.destroy_process_group()
    return SEED_STEPS * BATCH / elapsed



def clean_env() -> dict:
    drop = ("MASTER_ADDR", "MASTER_PORT", "NNODES", "NODE_RANK", "NPROC_PER_NODE", "WORLD_SIZE", "RANK",
            "LOCAL_RANK", "LOCAL_WORLD_SIZE", "DDPJOB_CHECKPOINT_DIR")
    return {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("PET_")}


def run_seed() -> float:
    out = subprocess.run([sys.executable, __file__, "--seed-loop"], env=clean_env(), check=True,
                         capture_output=True, text=True, timeout=600).stdout
    return float(out.strip().splitlines()[-1])


def run_ours(*flags: str) -> float:
    """ddpjob-train as a user runs it; throughput of its epochs after the first (warm-up,
    and torch.compile's compilation)."""
    exe = shutil.which("ddpjob-train")
    if exe is None:
        sys.exit("ddpjob-train is not on PATH (run through `make bench`)")
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        subprocess.run([exe, "--model", "mlp", "--data", "synthetic", "--batch-size", str(BATCH),
                        "--synthetic-size", str(SAMPLES), "--epochs", "3", "--eval-every", "0",
                        "--log-every", "100000", "--metrics-file", metrics, *flags],
                       env=clean_env(), check=True, capture_output=True, text=True, timeout=600)
        records = [json.loads(line) for line in open(metrics)]
    final = next(r for r in records if r["event"] == "final")
    if "compile" in final:  # which model --compile kept after timing both (compile_choice.py)
        CHOSEN.append(final["compile"])
    return statistics.median(r["samples_per_s"] for r in records if r["event"] == "epoch" and r["epoch"] > 1)


def machine() -> str:
    import torch

    model = platform.processor() or ""
    try:
        model = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return f"{os.cpu_count()} CPU(s) ({model}), {gpu}, torch {torch.__version__}, python {platform.python_version()}"


def variants(device: str) -> dict[str, tuple[str, ...]]:
    """ddpjob-train's ways to run the step: eager, compiled, and (on a GPU) replayed as
    one CUDA graph. Compiled only where torch.compile can build (triton on a GPU)."""
    import importlib.util

    out = {"eager": ()}
    if device == "cpu" or importlib.util.find_spec("triton") is not None:
        out["--compile"] = ("--compile",)
    if device == "cuda":
        out["--cuda-graph"] = ("--cuda-graph",)
    return out


def main() -> None:
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"machine: {machine()}")
    # Other work on the machine skews everything below; say how busy it was.
    print("load average before: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"device: {device}; MLP 784-512-256-10, batch {BATCH}, one process, {REPEATS} alternating runs each")
    ways = variants(device)
    runs: dict[str, list[float]] = {"seed loop": [], **{name: [] for name in ways}}
    for i in range(REPEATS):
        runs["seed loop"].append(run_seed())
        for name, flags in ways.items():
            runs[name].append(run_ours(*flags))
        print(f"  run {i + 1}: " + "   ".join(f"{name} {r[-1]:9.0f}" for name, r in runs.items()) + " samples/s")
    median = {name: statistics.median(r) for name, r in runs.items()}
    seed, goal = median["seed loop"], 10.0 if device == "cuda" else 1.5
    print(f"seed tutorial loop : {seed:9.0f} samples/s (median)")
    for name in ways:
        print(f"ddpjob-train {name:<12}: {median[name]:9.0f} samples/s (median), {median[name] / seed:.2f}x the seed loop")
    best = max(ways, key=median.get)
    print(f"ratio              : {median[best] / seed:.2f}x ({best}; goal >= {goal}x on {device}: "
          f"{'met' if median[best] / seed >= goal else 'NOT met'})")
    if "--compile" in median:
        ratio = median["--compile"] / median["eager"]
        print(f"--compile / eager  : {ratio:.2f} (goal: never slower, >= 1.0 within noise); "
              f"the model --compile kept in each run: {', '.join(CHOSEN)}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--seed-loop"]:
        print(seed_loop())
    else:
        main()
        print("load average after: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
