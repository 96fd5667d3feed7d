"""ResNet-50 on an ImageFolder of JPEGs, one GPU: ddpjob-train's whole-epoch throughput
against the model's compute ceiling and a pytorch/examples-style reference loop, all in
one run, and the crossover between decoding on the CPU's workers and on the GPU.

- ceiling: the same model, bf16 autocast, channels_last, fused Adam, on random tensors
  already on the GPU (no data loading at all), eager and torch.compile'd;
- reference: ImageFolder + torchvision transforms v1 (RandomResizedCrop, flip, ToTensor,
  Normalize) through a DataLoader with pinned memory, the pytorch/examples ImageNet loop;
- ddpjob-train as a user runs it (`--amp bf16 --channels-last`), `--decode cpu` and
  `--decode gpu`, for several worker counts.

Throughput is whole-epoch: every epoch's images over its wall time, epoch starts
included, over the epochs after the first (the first pays cuDNN's autotuning once).
Goals (docs/benchmarks.md, "On a GPU"): ddpjob-train >= 90% of the ceiling and >= 1.5x
the reference. Without a GPU it says so and measures nothing, unless `--smoke` asks for
a tiny CPU run of the script's own logic.

`--quick` (`make bench-gpu`, about 2.5 minutes on one H100 or H200): 2,048 JPEGs, one
worker count (all the cores but two: what a one-GPU node gives its one process, the CPU
decoder's best case), and each row printed complete as soon as it is measured, in the
order that keeps the goals' figures if time runs out: the eager ceiling, the reference,
ddpjob-train with each decoder, then the compiled ceiling (its compilation is the
longest wait).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# Run as a script (`make bench`), its own folder is first on the import path.
from trainer_vs_seed import clean_env, machine  # one home for both


def write_jpegs(root: str, images: int, classes: int = 10, size: tuple[int, int] = (400, 300)) -> None:
    """Photographs are not allowed to be downloaded: smooth colour fields with noise, so
    JPEG decoding costs what a photograph's does. Written by every core at once."""
    from concurrent.futures import ProcessPoolExecutor

    for c in range(classes):
        os.makedirs(os.path.join(root, "train", f"c{c}"), exist_ok=True)
    jobs = [(os.path.join(root, "train", f"c{i % classes}", f"{i}.jpg"), size, i) for i in range(images)]
    with ProcessPoolExecutor() as pool:
        list(pool.map(_write_jpeg, jobs, chunksize=64))


def _write_jpeg(job: tuple[str, tuple[int, int], int]) -> None:
    from PIL import Image, ImageFilter

    path, size, i = job
    rng = random.Random(i)
    noise = Image.effect_noise(size, 40).convert("RGB").filter(ImageFilter.GaussianBlur(1))
    tint = Image.new("RGB", size, tuple(rng.randrange(256) for _ in range(3)))
    Image.blend(noise, tint, 0.5).save(path, quality=90)


def ceiling(model_name: str, batch: int, image_size: int, compiled: bool, steps: int = 30, warmup: int = 10) -> dict:
    import torch

    from ddpjob_trainer.models import build_model

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = build_model(model_name, (3, image_size, image_size), 10).to(device, memory_format=torch.channels_last)  # type: ignore[call-overload]  # documented; stubs omit it
    optimizer = torch.optim.Adam(model.parameters(), fused=device.type == "cuda" or None)
    step_model = torch.compile(model) if compiled else model
    x = torch.randn(batch, 3, image_size, image_size, device=device).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (batch,), device=device)
    for i in range(steps + warmup):
        if i == warmup:
            sync(device)
            start = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(step_model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    sync(device)
    return {"images_per_s": steps * batch / (time.perf_counter() - start), "peak_gpu_mib": peak_mib(device)}


def peak_mib(device) -> float:
    """This process's peak GPU memory since the last call (0 on a CPU)."""
    import torch

    if device.type != "cuda":
        return 0.0
    peak = torch.cuda.max_memory_allocated() / 2**20
    torch.cuda.reset_peak_memory_stats()
    return peak


def sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def reference(root: str, model_name: str, batch: int, image_size: int, workers: int, epochs: int) -> dict:
    import torch
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    from ddpjob_trainer.models import build_model

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tf = transforms.Compose(
        [
            transforms.RandomResizedCrop(image_size),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
        ]
    )
    loader = DataLoader(
        datasets.ImageFolder(os.path.join(root, "train"), tf),
        batch_size=batch,
        shuffle=True,
        num_workers=workers,
        pin_memory=device.type == "cuda",
    )
    model = build_model(model_name, (3, image_size, image_size), 10).to(device, memory_format=torch.channels_last)  # type: ignore[call-overload]  # documented; stubs omit it
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rates = []
    for _ in range(epochs):
        start, seen = time.perf_counter(), 0
        for x, y in loader:
            x = x.to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
            y = y.to(device, non_blocking=True)
            with torch.autocast(device.type, dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            seen += len(y)
        sync(device)
        rates.append(seen / (time.perf_counter() - start))
    return {"images_per_s": statistics.mean(rates[1:] or rates), "peak_gpu_mib": peak_mib(device)}


def ours(root: str, model_name: str, batch: int, image_size: int, workers: int, epochs: int, decode: str) -> dict:
    exe = shutil.which("ddpjob-train")
    if exe is None:
        sys.exit("ddpjob-train is not on PATH (run through `make bench`)")
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        subprocess.run(
            [
                exe,
                "--model",
                model_name,
                "--data",
                f"imagefolder:{root}",
                "--image-size",
                str(image_size),
                "--batch-size",
                str(batch),
                "--amp",
                "bf16",
                "--channels-last",
                "--epochs",
                str(epochs),
                "--eval-every",
                "0",
                "--workers",
                str(workers),
                "--decode",
                decode,
                "--log-every",
                "100000",
                "--metrics-file",
                metrics,
            ],
            env=clean_env(),
            check=True,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        with open(metrics) as f:
            records = [json.loads(line) for line in f]
    epochs_ = [r for r in records if r["event"] == "epoch"]
    later = epochs_[1:] or epochs_
    return {
        "images_per_s": statistics.mean(r["samples_per_s"] for r in later),
        "peak_gpu_mib": max((r.get("peak_gpu_mib", 0) for r in epochs_), default=0),
    }


def verdict(r: dict, ceil: float, ref: float) -> str:
    rate = r["images_per_s"]
    met = rate >= 0.9 * ceil and rate >= 1.5 * ref
    return (
        f"{rate:8.0f} images/s whole-epoch, {rate / ceil:5.1%} of the eager ceiling, {rate / ref:4.2f}x the "
        f"reference, peak {r['peak_gpu_mib']:.0f} MiB (goals >= 90% and >= 1.5x: {'met' if met else 'NOT met'})"
    )


def main() -> None:
    import torch

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--smoke", action="store_true", help="a tiny CPU run of this script's logic (no figures)")
    p.add_argument("--quick", action="store_true", help="one worker count, rows as measured (make bench-gpu)")
    opts = p.parse_args()
    cuda = torch.cuda.is_available()
    print(f"machine: {machine()}", flush=True)
    if not cuda and not opts.smoke:
        print("no GPU: not run (the ResNet-50 goals are measured on one GPU; docs/benchmarks.md says 'not run yet')")
        return
    quick = opts.quick or opts.smoke
    # --smoke on a CPU: the least that runs every path (16 JPEGs: each of the 10 classes has
    # one; 4 steps an epoch; 2 epochs, the second measured), as bf16 is slow on most CPUs.
    model_name, images, batch, size, epochs = (
        ("resnet50", 2048 if quick else 4000, 128, 224, 3) if cuda else ("resnet18", 16, 4, 32, 2)
    )
    cpus = os.cpu_count() or 1
    if quick:
        worker_counts = [max(1, cpus - 2)] if cuda else [1]
    else:
        worker_counts = sorted({w for w in (1, 2, 4, 8, cpus - 2) if 1 <= w <= cpus}) if cuda else [1]
    decoders = ("cpu", "gpu") if cuda else ("cpu",)  # nvJPEG needs the GPU
    with tempfile.TemporaryDirectory() as root:
        write_jpegs(root, images)
        print(
            f"{model_name}, {images} JPEGs 400x300 in 10 classes, batch {batch}, image {size}, bf16, channels_last, "
            f"{epochs} epochs (throughput over epochs 2..{epochs}, epoch starts included)",
            flush=True,
        )
        steps = {} if cuda else {"steps": 2, "warmup": 1}  # --smoke: the logic, not a figure
        ceil = ceiling(model_name, batch, size, compiled=False, **steps)
        print(
            f"ceiling, eager      : {ceil['images_per_s']:8.0f} images/s (random tensors on the device), "
            f"peak {ceil['peak_gpu_mib']:.0f} MiB",
            flush=True,
        )
        for workers in worker_counts:
            ref = reference(root, model_name, batch, size, workers, epochs)
            if quick:
                print(
                    f"reference, {workers:2d} workers: {ref['images_per_s']:8.0f} images/s whole-epoch, "
                    f"{ref['images_per_s'] / ceil['images_per_s']:5.1%} of the eager ceiling, "
                    f"peak {ref['peak_gpu_mib']:.0f} MiB",
                    flush=True,
                )
            row = {}
            for decode in decoders:
                row[decode] = ours(root, model_name, batch, size, workers, epochs, decode)
                if quick:
                    print(
                        f"ddpjob-train --decode {decode}, {workers:2d} workers: "
                        + verdict(row[decode], ceil["images_per_s"], ref["images_per_s"]),
                        flush=True,
                    )
            if not quick:
                best = max(row, key=lambda k: row[k]["images_per_s"])
                line = "  ".join(
                    f"--decode {k} {v['images_per_s']:8.0f} ({v['images_per_s'] / ceil['images_per_s']:5.1%} of "
                    f"ceiling, {v['images_per_s'] / ref['images_per_s']:4.2f}x ref, peak {v['peak_gpu_mib']:.0f} MiB)"
                    for k, v in row.items()
                )
                print(f"workers {workers:2d}: reference {ref['images_per_s']:8.0f}  {line}  faster: {best}", flush=True)
        if cuda:
            compiled = ceiling(model_name, batch, size, compiled=True)
            print(
                f"ceiling, compiled   : {compiled['images_per_s']:8.0f} images/s, "
                f"{compiled['images_per_s'] / ceil['images_per_s']:4.2f}x eager, "
                f"peak {compiled['peak_gpu_mib']:.0f} MiB",
                flush=True,
            )


if __name__ == "__main__":
    main()
