"""Progress for people (global rank 0 only) and metrics for programs.

A tqdm bar when stdout is a terminal; otherwise one plain line every `log_every` steps,
because a bar's carriage returns turn Pod logs into one endless line. Metrics go to a
JSON-lines file, appended to across restarts, one object per line, flushed each time.
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch


def gpu_memory(device: torch.device) -> dict:
    if device.type != "cuda":
        return {}
    return {
        "gpu_mem_allocated_gb": round(torch.cuda.max_memory_allocated(device) / 2**30, 3),
        "gpu_mem_reserved_gb": round(torch.cuda.max_memory_reserved(device) / 2**30, 3),
    }


def _num(v) -> str:
    if isinstance(v, float):
        return f"{v:.0f}" if abs(v) >= 100 else f"{v:.4f}"
    return str(v)


class Progress:
    def __init__(self, enabled: bool, metrics_file: str | None, restart: int, log_every: int, epochs: int, device):
        self.enabled, self.restart, self.log_every, self.epochs, self.device = enabled, restart, log_every, epochs, device
        self.tty = enabled and sys.stdout.isatty()
        self.bar = None
        self.metrics = None
        if enabled and metrics_file:
            os.makedirs(os.path.dirname(os.path.abspath(metrics_file)), exist_ok=True)
            self.metrics = open(metrics_file, "a", encoding="utf-8")

    def record(self, event: str, **fields) -> None:
        """One metrics line: {"event", "restart", "time", ...fields}."""
        if self.metrics is None:
            return
        rec = {"event": event, **fields, "restart": self.restart, "time": round(time.time(), 3)}
        self.metrics.write(json.dumps(rec) + "\n")
        self.metrics.flush()

    def say(self, line: str) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.write(line)
        else:
            print(line, flush=True)

    def start_epoch(self, epoch: int, total: int, done: int) -> None:
        if self.tty:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=done, desc=f"epoch {epoch}/{self.epochs}", file=sys.stdout,
                            unit="step", dynamic_ncols=True)

    def tick(self) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def step(self, epoch: int, step: int, loss: float, accuracy: float, samples_per_s: float) -> None:
        """Called every `log_every` optimizer steps with the window's metrics."""
        fields = dict(epoch=epoch, step=step, loss=round(loss, 6), accuracy=round(accuracy, 6),
                      samples_per_s=round(samples_per_s, 1), **gpu_memory(self.device))
        self.record("step", **fields)
        if self.bar is not None:
            self.bar.set_postfix(loss=f"{loss:.4f}", acc=f"{accuracy:.3f}", sps=f"{samples_per_s:.0f}")
        else:
            self.say(f"epoch {epoch}/{self.epochs} step {step} loss {loss:.4f} acc {accuracy:.4f} "
                     f"{samples_per_s:.0f} samples/s")

    def end_epoch(self, **fields) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        fields.update(gpu_memory(self.device))
        self.record("epoch", **fields)
        self.say("epoch {epoch}/{n} done: ".format(n=self.epochs, **fields) + " ".join(
            f"{k} {_num(v)}" for k, v in fields.items() if k != "epoch"))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        if self.metrics is not None:
            self.metrics.close()
            self.metrics = None
