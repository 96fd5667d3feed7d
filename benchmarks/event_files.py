"""What TensorBoard's event files cost the built-in trainer, as a share of a training step.

Rank 0 hands every metrics record to `ddpjob_trainer.event_files.EventWriter` (one
protobuf built and queued; TensorBoard's writer thread serializes and writes it). This
measures, in one process on this machine's CPU:

- a step of the default job's model (`--model mlp`, batch 64, Adam): forward, backward,
  update, the median of several blocks;
- one step record written (six scalars, as ddpjob-train's with a GPU's memory fields),
  counting the writer thread's work too: N records added, then the writer closed (its
  queue drained and flushed), divided by N.

A record is written every `--log-every` steps (default 50), so the cost per step is the
record's cost / 50; the goal is < 1% of a step. The worst case, a record every step, is
printed too.

    .venv/bin/python benchmarks/event_files.py [--records 5000] [--steps 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import torch
import torch.nn.functional as F

from ddpjob.curves.record import POSITION
from ddpjob_trainer.event_files import EventWriter
from ddpjob_trainer.models import build_model

LOG_EVERY = 50  # ddpjob-train's default --log-every


def step_seconds(steps: int, blocks: int = 5) -> float:
    torch.manual_seed(0)
    model = build_model("mlp", (1, 28, 28), 10)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))
    times = []
    for block in range(blocks + 1):
        start = time.perf_counter()
        for _ in range(steps):
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        if block:  # the first block warms up
            times.append((time.perf_counter() - start) / steps)
    return statistics.median(times)


def record_seconds(records: int) -> float:
    with tempfile.TemporaryDirectory() as logdir:
        writer = EventWriter(logdir)
        writer.add({"event": POSITION, "step": 0})
        start = time.perf_counter()
        for step in range(1, records + 1):
            writer.add(
                {
                    "event": "step",
                    "step": step,
                    "epoch": 1,
                    "loss": 2.0 / step,
                    "accuracy": 0.5,
                    "lr": 1e-3,
                    "samples_per_s": 5000.0,
                    "gpu_mem_allocated_gb": 1.5,
                    "gpu_mem_reserved_gb": 2.0,
                    "restart": 0,
                    "time": time.time(),
                }
            )
        writer.close()  # the writer thread's share: everything serialized and on disk
        return (time.perf_counter() - start) / records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=5000)
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    step = step_seconds(args.steps)
    record = record_seconds(args.records)
    print(f"step (mlp, batch 64, 1 thread): {step * 1e3:.3f} ms")
    print(f"one step record in the event files: {record * 1e6:.1f} us")
    print(f"cost per step at --log-every {LOG_EVERY}: {record / LOG_EVERY / step:.4%} of a step (goal < 1%)")
    print(f"cost per step at --log-every 1 (a record every step): {record / step:.2%} of a step")


if __name__ == "__main__":
    main()
