"""One epoch of `ddpjob-train` (train.py's Trainer runs them): its micro-batches, each
optimizer step's stop vote, the progress lines every `--log-every` steps, and the
epoch's metrics summed over the ranks.

The loss sum and the correct count stay on the device (MicroStep's window): the host
reads them every `--log-every` steps, never per step, so a step has no GPU sync.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import torch
from torch import nn

from . import distributed, resize
from .data import Data
from .graph_step import CapturedStep
from .micro_step import MicroStep
from .progress import Heartbeat, Progress
from .sample_log import SampleLog
from .state import Position
from .stop import StepClock
from .testing_aids import hang, slow_step


class Signal(Protocol):
    signum: int  # the stop signal received, 0 for none
    clock: StepClock  # the step in flight's start: a stop finds it stuck, or not (stop.py)


class Run(Protocol):
    """What an epoch reads of the run that trains it (train.py's Trainer), and the one field
    it sets: named here, so that this module needs nothing of train.py, which imports it."""

    hang_at: int | None  # a testing aid's step to hang at, cleared once reached

    @property
    def args(self) -> Any: ...
    @property
    def d(self) -> distributed.Dist: ...
    @property
    def stop(self) -> Signal: ...
    @property
    def data(self) -> Data: ...
    @property
    def micro(self) -> MicroStep: ...
    @property
    def captured(self) -> CapturedStep | None: ...
    @property
    def optimizer(self) -> Any: ...
    @property
    def scaler(self) -> Any: ...
    @property
    def progress(self) -> Progress: ...
    @property
    def heartbeat(self) -> Heartbeat: ...
    @property
    def step_seconds(self) -> float: ...
    @property
    def pos(self) -> Position: ...
    @property
    def in_place(self) -> resize.InPlace | None: ...
    @property
    def samples(self) -> SampleLog | None: ...
    def save(self, summary: dict) -> None: ...


def train_epoch(t: Run, model: nn.Module, epoch: int) -> dict | resize.Regroup | None:
    """One epoch from t.pos.batch on; None when stopped by a signal (state saved);
    a Regroup when the group resizes in place (the epoch goes on from t.pos after)."""
    args, d, p, batches = t.args, t.d, t.progress, t.data.train
    n = len(batches)
    model.train()
    totals, window = torch.zeros(2, device=d.device), t.micro.window
    window.zero_()
    total_n = window_n = 0
    window_start = epoch_start = time.perf_counter()
    vote = distributed.StopVote(d) if t.in_place is None else resize.BoundaryVote(t.in_place)
    p.start_epoch(epoch, (n + args.grad_accum - 1) // args.grad_accum, t.pos.batch // args.grad_accum)
    for i, (x, y) in enumerate(batches.epoch(epoch, t.pos.batch), start=t.pos.batch):
        if t.pos.step + 1 == t.hang_at:
            t.hang_at = None
            hang(d.rank, t.pos.step + 1, lambda: t.stop.signum)
        t.heartbeat.reach(t.pos.step + 1)
        sync = (i + 1) % args.grad_accum == 0 or i + 1 == n
        if t.samples is not None:  # before the step: a step a lost peer breaks is made again
            t.samples.step(epoch, t.pos.step + 1, getattr(batches, "last_indices", ()))
        t.stop.clock.begin(t.pos.step + 1)
        try:
            stop = step(t, i, x, y, sync, vote, getattr(batches, "last_total", None))
        except Exception as exc:  # raised as is outside a group re-formed in place; failure() re-raises what is a bug
            if t.in_place is None:
                raise
            return t.in_place.failure(exc)
        finally:
            t.stop.clock.end()
        window_n += len(y)
        if not sync:
            continue
        if stop:
            # Say what will happen: "saving" only when there is somewhere to save to.
            where = (
                "saving a checkpoint"
                if args.checkpoint_dir
                else "stopping without a checkpoint (no --checkpoint-dir / DDPJOB_CHECKPOINT_DIR)"
            )
            if p.superseded is None:
                p.say(f"stop requested (signal {t.stop.signum or 'on another rank'}): {where}")
            return None
        if t.pos.step % args.log_every == 0 or i + 1 == n:
            totals += window
            total_n += window_n
            loss_sum, correct = window.tolist()
            now = time.perf_counter()
            p.step(
                epoch,
                t.pos.step,
                loss_sum / window_n,
                correct / window_n,
                window_n * d.world_size / (now - window_start),
                lr=t.optimizer.param_groups[0]["lr"],  # the rate this step used (TensorBoard's train/lr)
            )
            window.zero_()
            window_start, window_n = now, 0
    totals += window
    elapsed = time.perf_counter() - epoch_start
    sums = torch.cat([totals, torch.tensor([float(total_n + window_n)], device=d.device)])
    loss_sum, correct, count = distributed.all_reduce_sum(d, sums).tolist()
    if not count:  # resumed at the epoch's end (an elastic rejoin): no step, so no averages
        return {"samples": 0, "epoch_time_s": round(elapsed, 3), **distributed.peak_memory(d.device)}
    return {
        "loss": round(loss_sum / max(count, 1), 6),
        "accuracy": round(correct / max(count, 1), 6),
        "samples_per_s": round(count / elapsed, 1),
        "epoch_time_s": round(elapsed, 3),
        **distributed.peak_memory(d.device),
    }


def step(t: Run, i: int, x, y, sync: bool, vote, total: int | None) -> bool:
    """One micro-batch (the last of a step: the update and the vote); True: all stop."""
    args = t.args
    if sync:
        # Asked to stop, or the job moved on without this group (progress.py): every rank stops.
        vote.start(t.stop.signum != 0 or t.progress.superseded is not None)  # overlaps with this step's compute
    if t.captured is not None:
        t.captured(x, y)  # the micro-step and the optimizer's update, replayed
    else:
        with t.micro.accumulating(sync):
            t.micro(x, y, total)
    if not sync:
        return False
    if t.captured is None:
        t.scaler.step(t.optimizer)
        t.scaler.update()
        t.optimizer.zero_grad(set_to_none=True)
    t.pos.step += 1
    t.pos.batch = i + 1
    if t.step_seconds:
        slow_step(t.step_seconds)  # a testing aid (testing_aids.STEP_SECONDS), not a wait
    t.progress.tick()
    if args.checkpoint_dir and args.checkpoint_every_steps and t.pos.step % args.checkpoint_every_steps == 0:
        t.save({})
    return vote.result()
