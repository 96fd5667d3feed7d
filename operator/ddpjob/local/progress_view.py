"""`ddpjob run`'s view of progress: it reads the progress record and the heartbeats from
the files themselves (no HTTP: they are on this machine) into the same `ProgressState` the
operator builds from Pod 0's /progress, and shows it: one live line on a terminal (tqdm,
when installed), plain lines otherwise.
"""

from __future__ import annotations

import random
import threading
import time
from typing import IO, Any

from ddpjob import progress_record
from ddpjob.job.stall import ProgressState

PLAIN_EVERY_SECONDS = 10.0  # a log file gets a progress line at most this often
_LOCK = threading.Lock()
_ACTIVE: Display | None = None  # the display owning the terminal's last line, if any


def loopback_address() -> str:
    """A "Pod IP" for a Pod on this machine: any 127/8 address is this machine's loopback on
    Linux, so every Pod's launcher can bind the contract port without colliding."""
    return f"127.{random.randint(1, 254)}.{random.randint(0, 255)}.{random.randint(1, 254)}"


class AttemptProgress:
    """Progress of one gang attempt, read from its Pods' progress files."""

    def __init__(self, attempt: int, files: dict[int, str]):
        self.attempt, self.files = attempt, files  # node rank -> progress file
        self.tracker = progress_record.Tracker()

    def state(self, now: float | None = None) -> ProgressState:
        snap = self.tracker.snapshot(self.files[0], now) if 0 in self.files else {"seconds_since_progress": 0}
        state = ProgressState.from_snapshot(snap, self.attempt)
        ranks = {}
        for rank, path in self.files.items():
            if rank != 0:
                ranks.update(progress_record.read_heartbeats(path, now))
        return state.with_ranks(ranks)


def write_line(out: IO[str], text: str) -> None:
    """Write a log line above the live progress line, if one is showing."""
    with _LOCK:
        if _ACTIVE is not None and _ACTIVE.bar is not None:
            _ACTIVE.bar.clear()
            out.write(text)
            out.flush()
            _ACTIVE.bar.refresh()
        else:
            out.write(text)
            out.flush()


class Display:
    def __init__(self, out: IO[str], name: str):
        self.out, self.name = out, name
        self.tty = hasattr(out, "isatty") and out.isatty()
        self.bar: Any = None  # a tqdm bar, once the first record comes (tqdm is untyped)
        self.last_line = ""
        self.last_plain = 0.0

    def update(self, state: ProgressState | None) -> None:
        if state is None or not state.record:
            return
        record = state.record
        eta = progress_record.format_duration(state.eta_seconds)
        extra = " ".join(
            x
            for x in (
                f"{record['samples_per_s']:.0f} samples/s" if record.get("samples_per_s") is not None else "",
                f"loss {record['loss']:.4f}" if record.get("loss") is not None else "",
                f"ETA {eta}" if eta else "",
            )
            if x
        )
        line = f"{progress_record.summary(record)} {extra}".strip()
        if self.tty and self._bar(record, extra):
            return
        now = time.monotonic()
        if line != self.last_line and now - self.last_plain >= PLAIN_EVERY_SECONDS:
            self.last_line, self.last_plain = line, now
            write_line(self.out, f"[ddpjob] {self.name}: {line}\n")

    def _bar(self, record, extra: str) -> bool:
        global _ACTIVE
        try:
            from tqdm import tqdm
        except ImportError:  # tqdm comes with the trainer extra; plain lines do without it
            return False
        with _LOCK:
            if self.bar is None:
                self.bar = tqdm(
                    total=record.get("total_steps"),
                    desc=self.name,
                    unit="step",
                    file=self.out,
                    dynamic_ncols=True,
                    leave=True,
                )
                _ACTIVE = self
            if record.get("total_steps") and self.bar.total != record["total_steps"]:
                self.bar.total = record["total_steps"]
            self.bar.n = record["step"]
            epoch = (
                f"epoch {record['epoch']}/{record.get('total_epochs', '?')} " if record.get("epoch") is not None else ""
            )
            self.bar.set_postfix_str(epoch + extra, refresh=False)
            self.bar.refresh()
        return True

    def close(self) -> None:
        global _ACTIVE
        with _LOCK:
            if self.bar is not None:
                self.bar.close()
                self.bar = None
            if _ACTIVE is self:
                _ACTIVE = None
