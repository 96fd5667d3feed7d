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
    JPEG decoding costs what a photograph's does."""
    from PIL import Image, ImageFilter

    rng = random.Random(0)
    for i in range(images):
        d = os.path.join(root, "train", f"c{i % classes}")
        os.makedirs(d, exist_ok=True)
        noise = Image.effect_noise(size, 40).convert("RGB").filter(ImageFilter.GaussianBlur(1))
        tint = Image.new("RGB", size, tuple(rng.randrange(256) for _ in range(3)))
        Image.blend(noise, tint, 0.5).save(os.path.join(d, f"{i}.jpg"), quality=90)


def ceiling(model_name: str, batch: int, image_size: int, compiled: bool, steps: int = 30) -> float:
    import torch

    from ddpjob_trainer.models import build_model

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = build_model(model_name, (3, image_size, image_size), 10).to(device, memory_format=torch.channels_last)
    optimizer = torch.optim.Adam(model.parameters(), fused=device.type == "cuda" or None)
    step_model = torch.compile(model) if compiled else model
    x = torch.randn(batch, 3, image_size, image_size, device=device).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (batch,), device=device)
    for i in range(steps + 10):
        if i == 10:
            sync(device)
            start = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(step_model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    sync(device)
    return steps * batch / (time.perf_counter() - start)


def sync(device) -> None:
    import torch
    if device.type == "cuda":
        torch.cuda.synchronize()


def reference(root: str, model_name: str, batch: int, image_size: int, workers: int, epochs: int) -> float:
    import torch
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    from ddpjob_trainer.models import build_model

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tf = transforms.Compose([transforms.RandomResizedCrop(image_size), transforms.RandomHorizontalFlip(),
                             transforms.ToTensor(), transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
    loader = DataLoader(datasets.ImageFolder(os.path.join(root, "train"), tf), batch_size=batch, shuffle=True,
                        num_workers=workers, pin_memory=device.type == "cuda")
    model = build_model(model_name, (3, image_size, image_size), 10).to(device, memory_format=torch.channels_last)
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
    return statistics.mean(rates[1:] or rates)


def ours(root: str, model_name: str, batch: int, image_size: int, workers: int, epochs: int, decode: str) -> dict:
    exe = shutil.which("ddpjob-train")
    if exe is None:
        sys.exit("ddpjob-train is not on PATH (run through `make bench`)")
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        subprocess.run([exe, "--model", model_name, "--data", f"imagefolder:{root}", "--image-size", str(image_size),
                        "--batch-size", str(batch), "--amp", "bf16", "--channels-last", "--epochs", str(epochs),
                        "--eval-every", "0", "--workers", str(workers), "--decode", decode, "--log-every", "100000",
                        "--metrics-file", metrics], env=clean_env(), check=True, capture_output=True, text=True,
                       timeout=1800)
        records = [json.loads(line) for line in open(metrics)]
    epochs_ = [r for r in records if r["event"] == "epoch"]
    later = epochs_[1:] or epochs_
    return {"images_per_s": statistics.mean(r["samples_per_s"] for r in later),
            "peak_gpu_mib": max((r.get("peak_gpu_mib", 0) for r in epochs_), default=0)}


def main() -> None:
    import torch

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--smoke", action="store_true", help="a tiny CPU run of this script's logic (no figures)")
    opts = p.parse_args()
    cuda = torch.cuda.is_available()
    print(f"machine: {machine()}")
    if not cuda and not opts.smoke:
        print("no GPU: not run (the ResNet-50 goals are measured on one GPU; docs/benchmarks.md says 'not run yet')")
        return
    model_name, images, batch, size, epochs = ("resnet50", 4000, 128, 224, 3) if cuda else ("resnet18", 32, 8, 32, 2)
    cpus = os.cpu_count() or 1
    worker_counts = sorted({w for w in (1, 2, 4, 8, cpus - 2) if 1 <= w <= cpus}) if cuda else [1]
    with tempfile.TemporaryDirectory() as root:
        write_jpegs(root, images)
        print(f"{model_name}, {images} JPEGs 400x300 in 10 classes, batch {batch}, image {size}, bf16, channels_last, "
              f"{epochs} epochs (throughput over epochs 2..{epochs}, epoch starts included)")
        ceil = ceiling(model_name, batch, size, compiled=False)
        print(f"ceiling, eager      : {ceil:8.0f} images/s (random tensors on the device)")
        if cuda:
            print(f"ceiling, compiled   : {ceiling(model_name, batch, size, compiled=True):8.0f} images/s")
        for workers in worker_counts:
            ref = reference(root, model_name, batch, size, workers, epochs)
            row = {decode: ours(root, model_name, batch, size, workers, epochs, decode)
                   for decode in (("cpu", "gpu") if cuda else ("cpu",))}  # nvJPEG needs the GPU
            best = max(row, key=lambda k: row[k]["images_per_s"])
            line = "  ".join(f"--decode {k} {v['images_per_s']:8.0f} ({v['images_per_s'] / ceil:5.1%} of ceiling, "
                             f"{v['images_per_s'] / ref:4.2f}x ref, peak {v['peak_gpu_mib']:.0f} MiB)" for k, v in row.items())
            print(f"workers {workers:2d}: reference {ref:8.0f}  {line}  faster: {best}")


if __name__ == "__main__":
    main()
