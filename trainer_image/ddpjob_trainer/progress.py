"""Progress for people (global rank 0 only) and metrics for programs.

A tqdm bar when stdout is a terminal; otherwise one plain line every `log_every` steps,
because a bar's carriage returns turn Pod logs into one endless line. Metrics go to a
JSON-lines file, appended to across restarts, one object per line, flushed each time.
The progress record of the env contract (`ddpjob.progress_record`, $DDPJOB_PROGRESS_FILE)
is rewritten at the same moments; every rank also keeps a heartbeat file next to it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import threading
import time

import torch

from ddpjob import contract, progress_record
from ddpjob.curves.record import POSITION

from . import fence
from .event_files import EventWriter

FENCE_CHECK_SECONDS = 1.0  # how often a writer looks at the checkpoint fence (a few small reads)


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


class Heartbeat:
    """Every rank: the step it has reached, written to `<progress file>.rank<LOCAL_RANK>`
    by a thread every `interval` seconds. The loop only sets two attributes (no I/O per
    step); a rank blocked in a collective or asleep keeps beating but stops advancing."""

    def __init__(self, progress_file: str | None, local_rank: int, rank: int, interval: float = 1.0):
        self.path, self.local_rank, self.rank, self.interval = progress_file, local_rank, rank, interval
        self.step, self.step_time = 0, time.time()
        self._stop = threading.Event()
        self._thread = None
        if progress_file:
            self._thread = threading.Thread(target=self._run, name="ddpjob-heartbeat", daemon=True)
            self._thread.start()

    def reach(self, step: int) -> None:
        self.step, self.step_time = step, time.time()

    def _beat(self) -> None:
        assert self.path is not None  # the thread beats only when there is a progress file
        # a full or read-only disk must not stop training; the reader sees an old beat
        with contextlib.suppress(OSError):
            progress_record.write_heartbeat(self.path, self.local_rank, self.rank, self.step, self.step_time)

    def _run(self) -> None:
        self._beat()
        while not self._stop.wait(self.interval):
            self._beat()

    def close(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=5)
            self._beat()
            self._thread = None


class Progress:
    def __init__(
        self,
        enabled: bool,
        metrics_file: str | None,
        restart: int,
        log_every: int,
        epochs: int,
        device,
        progress_file: str | None = None,
        total_steps: int | None = None,
    ):
        self.enabled, self.restart, self.log_every, self.epochs, self.device = (
            enabled,
            restart,
            log_every,
            epochs,
            device,
        )
        self.tty = enabled and sys.stdout.isatty()
        self.bar = None
        self.metrics = None
        self.progress_file = progress_file if enabled else None
        self.total_steps = total_steps
        self.events: EventWriter | None = None  # TensorBoard's copy of the records (of_rank opens it)
        # Whether the metrics say where training goes on from (a start, a resume, a join:
        # the first publish; a resize says it itself): the curves' readers drop what an
        # earlier attempt logged after it (ddpjob.curves, event_files.py).
        self.positioned = False
        # Who writes, besides the attempt (`restart`): the group's generation and its term of
        # the checkpoint fence (set by train.py's `Trainer.authority`). Every metrics line and
        # progress record carries them, so a reader can drop what a writer the job moved on
        # without wrote after the job had moved on (fence.py).
        self.authority: dict[str, int] = {}
        # (checkpoint directory, this group's claim): a writer the job moved on without
        # learns it here, writes nothing more, and stops all ranks at the step's end (epoch.py).
        self.fenced: tuple[str, fence.Claim] | None = None
        self.superseded: str | None = None
        self.fence_checked = 0.0
        if enabled and metrics_file:
            os.makedirs(os.path.dirname(os.path.abspath(metrics_file)), exist_ok=True)
            self.metrics = open(metrics_file, "a", encoding="utf-8")  # noqa: SIM115 - open for the run; close() closes it

    @classmethod
    def of_rank(cls, args, d, total_steps: int) -> Progress:
        """ddpjob-train's reporter for this rank (`d`: distributed.Dist): global rank 0's is on."""
        progress_file = os.environ.get(contract.PROGRESS_FILE) or None
        p = cls(
            d.is_main,
            args.metrics_file,
            d.env.restart_count,
            args.log_every,
            args.epochs,
            d.device,
            progress_file=progress_file,
            total_steps=total_steps,
        )
        if d.env.elastic_max_nodes and d.env.local_rank == 0 and os.environ.get(contract.NODE_RANK) == "0":
            # The operator reads Pod 0's record, and an elastic group's rank 0 may be on any Pod.
            p.progress_file = progress_file
        if d.is_main:
            p.events = EventWriter.open(args.checkpoint_dir, d.env.restart_count, p.say)
        return p

    def publish(self, epoch: int, step: int, stage: str = progress_record.TRAINING, **fields) -> None:
        """Rewrite the progress record (global rank 0 only); `stage` says where the trainer
        is (training, evaluating, saving, exiting: past its last step a job is finishing,
        never stalled)."""
        if not self.positioned:  # the first: where training goes on from
            self.record(POSITION, epoch=epoch, step=step)
        if self.progress_file is None or self.moved_on():
            return
        # A diverged loss (nan, inf) is no number JSON can carry: leave it out, keep training.
        fields = {k: v for k, v in fields.items() if not isinstance(v, float) or math.isfinite(v)}
        try:
            progress_record.write(
                self.progress_file,
                step=step,
                total_steps=self.total_steps,
                epoch=epoch,
                total_epochs=self.epochs,
                stage=stage,
                **fields,
                **self.stamp(),
            )
        except OSError as e:
            self.say(f"warning: cannot write the progress record {self.progress_file}: {e}")
            self.progress_file = None

    def stamp(self) -> dict:
        """The writer: {"restart", and "generation" (elastic jobs), "term" (with a checkpoint fence)}."""
        return {"restart": self.restart, **self.authority}

    def moved_on(self) -> bool:
        """Whether a newer term holds the checkpoint fence (read at most every FENCE_CHECK_SECONDS)."""
        now = time.monotonic()
        if self.superseded is None and self.fenced is not None and now - self.fence_checked >= FENCE_CHECK_SECONDS:
            self.fence_checked = now
            try:
                fence.check(*self.fenced, "metrics")
            except fence.Superseded as e:
                self.superseded = str(e)
        return self.superseded is not None

    def record(self, event: str, **fields) -> None:
        """One metrics line: {"event", ...fields, "restart", ["generation",] ["term",] "time"},
        and its points in the event files; none once the job moved on without this writer."""
        if self.moved_on():
            return
        rec = {"event": event, **fields, **self.stamp(), "time": round(time.time(), 3)}
        self.positioned = self.positioned or event in (POSITION, "resize")
        if self.events is not None:
            self.events.add(rec)
        if self.metrics is None:
            return
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

            self.bar = tqdm(
                total=total,
                initial=done,
                desc=f"epoch {epoch}/{self.epochs}",
                file=sys.stdout,
                unit="step",
                dynamic_ncols=True,
            )

    def tick(self) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def step(
        self, epoch: int, step: int, loss: float, accuracy: float, samples_per_s: float, lr: float | None = None
    ) -> None:
        """Called every `log_every` optimizer steps with the window's metrics."""
        fields = dict(
            epoch=epoch,
            step=step,
            loss=round(loss, 6),
            accuracy=round(accuracy, 6),
            samples_per_s=round(samples_per_s, 1),
            **({"lr": lr} if lr is not None else {}),
            **gpu_memory(self.device),
        )
        self.record("step", **fields)
        self.publish(epoch, step, loss=round(loss, 6), samples_per_s=round(samples_per_s, 1))
        if self.bar is not None:
            self.bar.set_postfix(loss=f"{loss:.4f}", acc=f"{accuracy:.3f}", sps=f"{samples_per_s:.0f}")
        else:
            self.say(
                f"epoch {epoch}/{self.epochs} step {step} loss {loss:.4f} acc {accuracy:.4f} "
                f"{samples_per_s:.0f} samples/s"
            )

    def end_epoch(self, **fields) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        fields.update(gpu_memory(self.device))
        self.record("epoch", **fields)
        self.publish(
            fields["epoch"], fields["step"], loss=fields.get("loss"), samples_per_s=fields.get("samples_per_s")
        )
        self.say(
            "epoch {epoch}/{n} done: ".format(n=self.epochs, **fields)
            + " ".join(f"{k} {_num(v)}" for k, v in fields.items() if k != "epoch")
        )

    def done(self, epoch: int, step: int, summary: dict, **fields) -> None:
        """Training is over: the final metrics line, and the record says the trainer is
        exiting (tearing the group down is no stall)."""
        self.record("final", epoch=epoch, step=step, **fields, **summary)
        self.publish(
            epoch, step, progress_record.EXITING, loss=summary.get("loss"), samples_per_s=summary.get("samples_per_s")
        )
        self.say(f"done: {epoch} epoch(s), {step} steps")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        if self.metrics is not None:
            self.metrics.close()
            self.metrics = None
        if self.events is not None:
            self.events.close()
            self.events = None
