"""`--sample-log DIR`: which samples went into which optimizer step, for the audit that
proves every sample was trained on exactly once per epoch (ddpjob_devcluster.scenarios.sample_audit reads it;
the format is described there)."""

from __future__ import annotations

import json
import os
import time

from .distributed import Dist, broadcast_object


class SampleLog:
    def __init__(self, directory: str, d: Dist, start_step: int, writer: dict | None = None):
        """`writer`: who writes (progress.Progress.stamp: restart, generation, term), in the header."""
        gen = broadcast_object(d, time.time_ns())  # one id for the group, in time order
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"samples-{gen:020d}-r{d.rank:05d}.jsonl")
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - open for the run; close() closes it
        self._write({"gen": gen, "start_step": start_step, "world": d.world_size, **(writer or {})})

    def _write(self, record: dict) -> None:
        record["t"] = round(time.time(), 3)  # when: the benchmark times resizes from it
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()

    def step(self, epoch: int, step: int, indices) -> None:
        self._write({"epoch": epoch, "step": step, "idx": [int(i) for i in indices]})

    def close(self) -> None:
        self.file.close()
