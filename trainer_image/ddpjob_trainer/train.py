"""`ddpjob-train`: the built-in DDP trainer, one process per rank.

Distributed state is read at the edges (env.py, distributed.py); this module is the
loop: resume, train with DDP, evaluate sharded, checkpoint, stop cleanly on SIGTERM.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from ddpjob import contract, progress_record

from . import EXIT_BAD_INPUT, EXIT_PREEMPTED, UsageError, batch_probe, cli, compile_choice, distributed, graph_step
from . import state
from .data import load_data
from .env import read_process_env
from .micro_step import MicroStep
from .models import build_model
from .optimizer import make_optimizer
from .progress import Heartbeat, Progress
from .sample_log import SampleLog

# Testing aid: SIGKILL rank 0 right after epoch N's checkpoint, like a node dying there.
KILL_AFTER_EPOCH = "DDPJOB_TEST_KILL_AFTER_EPOCH"
# Testing aid: in the first attempt only, global rank DDPJOB_TEST_HANG_RANK (default 1)
# stops before optimizer step N without exiting, like a deadlocked data loader; it goes
# on only when asked to stop (SIGTERM), so the gang saves a checkpoint and exits.
HANG_AT_STEP, HANG_RANK = "DDPJOB_TEST_HANG_AT_STEP", "DDPJOB_TEST_HANG_RANK"
# Testing aid: every optimizer step takes at least this long (0-10 s), so a test's job
# outlasts its resizes on a fast machine as on a slow one.
STEP_SECONDS = "DDPJOB_TEST_STEP_SECONDS"


def log(msg: str) -> None:
    print(f"ddpjob-train: {msg}", file=sys.stderr, flush=True)


class StopRequest:
    """SIGTERM/SIGINT only set a flag; the loop finishes its step, saves and exits."""

    def __init__(self):
        self.signum = 0
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)

    def _handle(self, signum, _frame):
        self.signum = signum


class Trainer:
    def __init__(self, args, d: distributed.Dist, stop: StopRequest):
        self.args, self.d, self.stop = args, d, stop
        dev = d.device
        if args.strategy != "ddp" and d.world_size > 1:
            raise UsageError(f"--strategy {args.strategy} runs in one process, but WORLD_SIZE={d.world_size}")
        if args.amp == "fp16" and dev.type != "cuda":
            raise UsageError("--amp fp16 needs a CUDA device (use bf16 on CPU)")
        if args.decode == "gpu" and dev.type != "cuda":
            raise UsageError("--decode gpu decodes JPEGs with nvJPEG and needs a CUDA device: use --decode cpu")
        if args.sync_bn and dev.type != "cuda" and args.strategy == "ddp" and d.world_size > 1:
            raise UsageError("--sync-bn needs CUDA devices (torch's SyncBatchNorm only works with GPU modules)")
        auto_batch = args.batch_size == cli.AUTO_BATCH
        if auto_batch and dev.type != "cuda":
            raise UsageError("--batch-size auto finds what fits in GPU memory and needs a CUDA device: give a number")
        args.batch_size = args.batch_size or 1  # auto: 1 until the probe (batch_probe.py) has spoken
        self.data = load_data(args, d)
        # An elastic job's fixed global micro-batch (elastic_data.py), kept in its checkpoints.
        args.elastic_global_batch = getattr(self.data.train, "global_size", None)
        if args.cuda_graph and (why := graph_step.refusal(args, dev, d.world_size, args.elastic_global_batch is not None)):
            raise UsageError(why)
        self.samples: SampleLog | None = None
        if self.data.eval is None and args.eval_every:
            log("warning: this dataset has no evaluation split; evaluation is skipped")
        state.seed_everything(args.seed, 0)  # identical initial weights on every rank
        model = build_model(args.model, self.data.input_shape, self.data.num_classes)
        if args.sync_bn and args.strategy == "ddp" and d.world_size > 1:
            model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
        self.model = model.to(dev, memory_format=torch.channels_last if args.channels_last else torch.preserve_format)
        self.optimizer = make_optimizer(args, self.model.parameters(), dev)
        # Loss scaling only for fp16; bf16 has fp32's range and needs none.
        self.scaler = torch.amp.GradScaler(dev.type, enabled=args.amp == "fp16")
        self.amp = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.amp)
        self.micro = MicroStep(self.model, self.scaler, self.amp, dev, args.grad_accum, d.world_size,
                               graph_safe=args.cuda_graph)
        self.captured: graph_step.CapturedStep | None = None
        if auto_batch:
            args.batch_size = batch_probe.choose(self.model, self.optimizer, self.data.input_shape,
                                                 self.data.num_classes, dev, self.autocast, args.channels_last)
            log(f"--batch-size auto: {args.batch_size} per process fits on {dev}")
            self.data = load_data(args, d)
        steps_per_epoch = (len(self.data.train) + args.grad_accum - 1) // args.grad_accum
        progress_file = os.environ.get(contract.PROGRESS_FILE) or None
        self.progress = Progress(d.is_main, args.metrics_file, d.env.restart_count, args.log_every, args.epochs, dev,
                                 progress_file=progress_file, total_steps=steps_per_epoch * args.epochs)
        if d.env.elastic_max_nodes and d.env.local_rank == 0 and os.environ.get(contract.NODE_RANK) == "0":
            # The operator reads Pod 0's record, and an elastic group's rank 0 may be on any Pod.
            self.progress.progress_file = progress_file
        self.heartbeat = Heartbeat(progress_file, d.env.local_rank, d.rank)
        self.hang_at = self._hang_step()
        self.step_seconds = min(max(float(os.environ.get(STEP_SECONDS) or 0), 0.0), 10.0)
        self.pos = state.Position()
        state.seed_everything(args.seed, d.rank)

    def wrap(self) -> nn.Module:
        m, d = self.model, self.d
        if self.args.strategy == "ddp" and d.world_size > 1:
            # Gradients live in the all-reduce buckets: no copy in and out of them.
            m = DDP(m, device_ids=[d.device.index] if d.device.type == "cuda" else None,
                    gradient_as_bucket_view=True)
        elif self.args.strategy == "dp":
            m = nn.DataParallel(m)  # splits each batch over all local GPUs; a no-op on CPU
        if self.args.compile:
            m = compile_choice.CompileChoice(m, compile_choice.compile_model(m), d.device, self.args.grad_accum,
                                             self.progress.say, lambda t: distributed.all_reduce_sum(d, t))
        self.micro.model = m
        if self.args.cuda_graph:
            self.captured = graph_step.CapturedStep(self.micro, self.optimizer)
        return m

    def autocast(self):
        return self.micro.autocast()

    def run(self) -> int:
        args, d, p = self.args, self.d, self.progress
        p.record("start", epoch=0, world_size=d.world_size, model=args.model, data=args.data,
                 epochs=args.epochs, batch_size=args.batch_size, device=str(d.device), backend=d.backend)
        summary: dict = {}  # the last completed epoch's metrics
        if args.checkpoint_dir:
            resumed = state.restore(d, args.checkpoint_dir, self.model, self.optimizer, self.scaler, args)
            if resumed:
                self.pos, path, summary = resumed
                p.record("resume", epoch=self.pos.epoch, next_epoch=self.pos.epoch + 1, batch=self.pos.batch,
                         step=self.pos.step, checkpoint=os.path.basename(path))
                p.say(state.resumed(self.pos, args.epochs, path, args.checkpoint_dir))
        p.publish(self.pos.epoch, self.pos.step)
        self.heartbeat.reach(self.pos.step)
        if args.sample_log:
            self.samples = SampleLog(args.sample_log, d, self.pos.step)
        model = self.wrap()
        while self.pos.epoch < args.epochs:
            epoch = self.pos.epoch + 1
            epoch_summary = self.train_epoch(model, epoch)
            if epoch_summary is None:
                return self.preempted(summary)
            summary = epoch_summary
            self.pos = state.Position(epoch, 0, self.pos.step)
            if args.eval_every and (epoch % args.eval_every == 0 or epoch == args.epochs):
                p.publish(epoch, self.pos.step, progress_record.EVALUATING)
                summary.update(self.evaluate())
            if args.checkpoint_dir and (epoch % args.checkpoint_every == 0 or epoch == args.epochs):
                p.publish(epoch, self.pos.step, progress_record.SAVING)
                self.save(summary)
            p.end_epoch(epoch=epoch, step=self.pos.step, **summary)
            if os.environ.get(KILL_AFTER_EPOCH) == str(epoch) and d.is_main:
                os.kill(os.getpid(), signal.SIGKILL)
        ways = {"graph_replays": self.captured.replays} if self.captured is not None else {}
        if isinstance(model, compile_choice.CompileChoice):
            ways["compile"] = model.chosen or "undecided"
        p.done(self.pos.epoch, self.pos.step, summary, **ways)
        return 0

    def train_epoch(self, model: nn.Module, epoch: int) -> dict | None:
        """One epoch from self.pos.batch on; None when stopped by a signal (state saved)."""
        args, d, p, batches = self.args, self.d, self.progress, self.data.train
        n = len(batches)
        model.train()
        # Loss sum and correct count stay on the device: no .item() (a GPU sync) per step.
        totals, window = torch.zeros(2, device=d.device), self.micro.window
        window.zero_()
        total_n = window_n = 0
        window_start = epoch_start = time.perf_counter()
        vote = distributed.StopVote(d)
        p.start_epoch(epoch, (n + args.grad_accum - 1) // args.grad_accum, self.pos.batch // args.grad_accum)
        for i, (x, y) in enumerate(batches.epoch(epoch, self.pos.batch), start=self.pos.batch):
            if self.pos.step + 1 == self.hang_at:
                self.hang()
            self.heartbeat.reach(self.pos.step + 1)
            sync = (i + 1) % args.grad_accum == 0 or i + 1 == n
            if sync:
                vote.start(self.stop.signum != 0)  # overlaps with this step's compute
            if self.captured is not None:
                self.captured(x, y)  # the micro-step and the optimizer's update, replayed
            else:
                with self.micro.accumulating(sync):
                    self.micro(x, y, getattr(batches, "last_total", None))
            window_n += len(y)
            if self.samples is not None:
                self.samples.step(epoch, self.pos.step + 1, getattr(batches, "last_indices", ()))
            if not sync:
                continue
            if self.captured is None:
                self.scaler.step(self.optimizer)
                self.scaler.update()
                self.optimizer.zero_grad(set_to_none=True)
            self.pos.step += 1
            self.pos.batch = i + 1
            if self.step_seconds:
                time.sleep(self.step_seconds)
            p.tick()
            if args.checkpoint_dir and args.checkpoint_every_steps and self.pos.step % args.checkpoint_every_steps == 0:
                self.save({})
            if vote.result():
                # Say what will happen: "saving" only when there is somewhere to save to.
                self.progress.say(f"stop requested (signal {self.stop.signum or 'on another rank'}): " + (
                    "saving a checkpoint" if self.args.checkpoint_dir else
                    "stopping without a checkpoint (no --checkpoint-dir / DDPJOB_CHECKPOINT_DIR)"))
                return None
            if self.pos.step % args.log_every == 0 or i + 1 == n:
                totals += window
                total_n += window_n
                loss_sum, correct = window.tolist()
                now = time.perf_counter()
                p.step(epoch, self.pos.step, loss_sum / window_n, correct / window_n,
                       window_n * d.world_size / (now - window_start))
                window.zero_()
                window_start, window_n = now, 0
        totals += window
        elapsed = time.perf_counter() - epoch_start
        sums = torch.cat([totals, torch.tensor([float(total_n + window_n)], device=d.device)])
        loss_sum, correct, count = distributed.all_reduce_sum(d, sums).tolist()
        return {"loss": round(loss_sum / max(count, 1), 6), "accuracy": round(correct / max(count, 1), 6),
                "samples_per_s": round(count / elapsed, 1), "epoch_time_s": round(elapsed, 3),
                **distributed.peak_memory(d.device)}

    def _hang_step(self) -> int | None:
        at = os.environ.get(HANG_AT_STEP)
        if not at or self.d.env.restart_count != 0 or str(self.d.rank) != os.environ.get(HANG_RANK, "1"):
            return None
        return int(at)

    def hang(self) -> None:
        self.hang_at = None
        log(f"testing aid: rank {self.d.rank} hangs before step {self.pos.step + 1} ({HANG_AT_STEP})")
        while not self.stop.signum:
            time.sleep(0.1)

    @torch.no_grad()
    def evaluate(self) -> dict:
        """Each rank scores its own disjoint shard; sums are all-reduced, so the numbers
        are exact over the whole evaluation set."""
        if self.data.eval is None:
            return {}
        self.model.eval()
        totals = torch.zeros(3, device=self.d.device)
        for x, y in self.data.eval.epoch(0):
            with self.autocast():
                out = self.model(x)  # the unwrapped model: shards may differ in size
            totals += torch.stack([F.cross_entropy(out.float(), y, reduction="sum"),
                                   (out.argmax(1) == y).sum().float(), torch.tensor(float(len(y)), device=x.device)])
        self.model.train()
        loss_sum, correct, count = distributed.all_reduce_sum(self.d, totals).tolist()
        return {"eval_loss": round(loss_sum / max(count, 1), 6), "eval_accuracy": round(correct / max(count, 1), 6)}

    def save(self, summary: dict) -> None:
        path = state.save(self.d, self.args.checkpoint_dir, self.args.keep_checkpoints, self.pos,
                          self.model, self.optimizer, self.scaler, self.args, summary)
        if path:
            self.progress.say(f"checkpoint {path}")

    def preempted(self, summary: dict) -> int:
        if self.args.checkpoint_dir:
            self.save(summary)
        self.progress.record("preempted", epoch=self.pos.epoch, batch=self.pos.batch, step=self.pos.step,
                             exit_code=EXIT_PREEMPTED)
        return EXIT_PREEMPTED


def main(argv: list[str] | None = None) -> int:
    args = cli.parse(argv)  # exits 2 itself on a bad flag
    stop = StopRequest()
    trainer = None
    try:
        d = distributed.setup(read_process_env())
        trainer = Trainer(args, d, stop)
        return trainer.run()
    except UsageError as e:
        log(f"error: {e}")
        return EXIT_BAD_INPUT
    finally:
        if trainer is not None:
            if trainer.samples is not None:
                trainer.samples.close()
            trainer.progress.close()
            trainer.heartbeat.close()
        trainer = None  # its model (a DDP) goes before the process group (distributed.teardown)
        distributed.teardown()


if __name__ == "__main__":
    from .quick_exit import exit_with

    exit_with(main(), quick=(EXIT_PREEMPTED,))  # asked to stop, saved, process group gone: go now
