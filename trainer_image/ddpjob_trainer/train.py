"""`ddpjob-train`: the built-in DDP trainer, one process per rank.

Distributed state is read at the edges (env.py, distributed.py); this module is the
run: build the model and its executor, resume, train epoch after epoch (epoch.py),
evaluate sharded, checkpoint, stop cleanly on SIGTERM.
"""

from __future__ import annotations

import os
import sys
import traceback

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from ddpjob import contract, exit_codes, progress_record

from . import (
    UsageError,
    authority,
    batch_probe,
    cli,
    compile_choice,
    distributed,
    fence,
    graph_step,
    graphed_model,
    group_reset,
    resize,
    stacks,
    state,
    stop as stopping,
)
from .data import load_data
from .env import read_process_env
from .epoch import train_epoch
from .evaluation import evaluate
from .micro_step import MicroStep
from .models import build_model
from .optimizer import make_optimizer
from .progress import Heartbeat, Progress
from .roster import NoGroup
from .sample_log import SampleLog
from .testing_aids import after_epoch, hang_step, step_seconds


def log(msg: str) -> None:
    print(f"ddpjob-train: {msg}", file=sys.stderr, flush=True)


class Trainer:
    def __init__(self, args, d: distributed.Dist, stop: stopping.StopRequest):
        self.args, self.d, self.stop = args, d, stop
        self.fence: fence.Claim | None = None  # this group's term of the checkpoint fence (claim)
        self.in_place: resize.InPlace | None = None
        dev = d.device
        cli.refuse_for_device(args, dev.type, d.world_size)
        auto_batch = args.batch_size == cli.AUTO_BATCH
        args.batch_size = args.batch_size or 1  # auto: 1 until the probe (batch_probe.py) has spoken
        self.data = load_data(args, d)
        # An elastic job's fixed global micro-batch (elastic_data.py), kept in its checkpoints.
        args.elastic_global_batch = getattr(self.data.train, "global_size", None)
        # Whether the step is captured as a CUDA graph: the optimizer and the micro-step are
        # built for it (capturable, no autocast cache) before the model trains.
        self.graph = graph_step.plan(args, dev.type, d.world_size, bool(args.elastic_global_batch) or d.in_place)
        self.samples: SampleLog | None = None
        if self.data.eval is None and args.eval_every:
            log("warning: this dataset has no evaluation split; evaluation is skipped")
        state.seed_everything(args.seed, 0)  # identical initial weights on every rank
        model = build_model(args.model, self.data.input_shape, self.data.num_classes)
        if args.sync_bn and args.strategy == "ddp" and d.world_size > 1:
            model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
        layout = torch.channels_last if args.channels_last else torch.preserve_format
        self.model = model.to(dev, memory_format=layout)  # type: ignore[call-overload]  # documented; stubs omit it
        self.optimizer = make_optimizer(args, self.model.parameters(), dev, capturable=self.graph.capture)
        self.scaler = torch.amp.GradScaler(dev.type, enabled=args.amp == "fp16")  # bf16 has fp32's range: no scaling
        self.amp = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.amp)
        safe = self.graph.capture or self.graph.partial  # no autocast cache kept from one replay to the next
        self.micro = MicroStep(self.model, self.scaler, self.amp, dev, args.grad_accum, d.world_size, graph_safe=safe)
        self.captured: graph_step.CapturedStep | None = None
        if auto_batch:
            args.batch_size = batch_probe.choose(
                self.model,
                self.optimizer,
                self.data.input_shape,
                self.data.num_classes,
                dev,
                self.autocast,
                args.channels_last,
            )
            log(f"--batch-size auto: {args.batch_size} per process fits on {dev}")
            self.data = load_data(args, d)
        self.progress = self.new_progress()
        if self.graph.line:
            self.progress.say(self.graph.line)
        self.heartbeat = Heartbeat(os.environ.get(contract.PROGRESS_FILE) or None, d.env.local_rank, d.rank)
        self.step_seconds = step_seconds()
        self.pos = state.Position()
        self.in_place = resize.InPlace(self) if d.in_place else None  # the in-place group forms (or is joined) here
        self.finished = self.in_place is not None and not self.in_place.join()
        self.hang_at = hang_step(d.env.restart_count, d.rank)
        state.seed_everything(args.seed, d.rank)

    def new_progress(self) -> Progress:
        """This rank's progress reporter (global rank 0's reports; remade when that changes hands)."""
        steps = (len(self.data.train) + self.args.grad_accum - 1) // self.args.grad_accum * self.args.epochs
        return authority.stamp(self, Progress.of_rank(self.args, self.d, steps))

    def remake_progress(self) -> None:  # a group that resizes in place: rank 0 may have moved
        if self.progress.enabled != self.d.is_main:
            self.progress.close()
            self.progress = self.new_progress()

    def wrap(self) -> nn.Module:
        m, d = self.model, self.d
        if self.graph.partial:  # before DDP wraps it (torch's order for partial capture)
            layout = torch.channels_last if self.args.channels_last else torch.contiguous_format
            sample = torch.randn(self.args.batch_size, *self.data.input_shape, device=d.device)
            sample = sample.contiguous(memory_format=layout) if sample.dim() == 4 else sample
            m = graphed_model.capture(m, sample, self.micro.autocast, self.progress.say)
        if self.args.strategy == "ddp" and (d.world_size > 1 or self.in_place is not None):
            # Gradients live in the all-reduce buckets: no copy in and out of them.
            ddp = DDP if self.in_place is None else self.in_place.el.wrap
            m = ddp(m, device_ids=[d.device.index] if d.device.type == "cuda" else None, gradient_as_bucket_view=True)
        elif self.args.strategy == "dp":
            m = nn.DataParallel(m)  # splits each batch over all local GPUs; a no-op on CPU
        if self.args.compile:
            m = compile_choice.CompileChoice(
                m,
                compile_choice.compile_model(m),
                d.device,
                self.args.grad_accum,
                self.progress.say,
                lambda t: distributed.all_reduce_sum(d, t),
            )
        self.micro.model = m
        if self.graph.capture:  # asked for (--cuda-graph): a failed capture is raised; by default, said
            fallback = None if self.args.cuda_graph else self.progress.say
            self.captured = graph_step.CapturedStep(self.micro, self.optimizer, fallback=fallback)
        return m

    def autocast(self):
        return self.micro.autocast()

    def run(self) -> int:
        args, d, p = self.args, self.d, self.progress
        if self.finished:  # a node created again too late: the others finished
            return 0
        if args.checkpoint_dir and not (self.in_place and self.in_place.from_peer):
            authority.claim(self)  # a newcomer's group claimed its term as it formed (resize.py)
        p.record(
            "start",
            epoch=0,
            world_size=d.world_size,
            model=args.model,
            data=args.data,
            epochs=args.epochs,
            batch_size=args.batch_size,
            device=str(d.device),
            backend=d.backend,
        )
        summary: dict = {}  # the last completed epoch's metrics
        if args.checkpoint_dir and not (self.in_place and self.in_place.from_peer):
            resumed = state.restore(d, args.checkpoint_dir, self.model, self.optimizer, self.scaler, args)
            if resumed:
                self.pos, path, summary = resumed
                p.record(
                    "resume",
                    epoch=self.pos.epoch,
                    next_epoch=self.pos.epoch + 1,
                    batch=self.pos.batch,
                    step=self.pos.step,
                    checkpoint=os.path.basename(path),
                )
                p.say(state.resumed(self.pos, args.epochs, path, args.checkpoint_dir))
        p.publish(self.pos.epoch, self.pos.step)
        self.heartbeat.reach(self.pos.step)
        if args.sample_log and self.samples is None:  # (a group that resizes in place made it)
            self.samples = SampleLog(args.sample_log, d, self.pos.step, self.progress.stamp())
        model = self.wrap()
        while self.pos.epoch < args.epochs:
            epoch = self.pos.epoch + 1
            epoch_summary = train_epoch(self, model, epoch)
            if isinstance(epoch_summary, resize.Regroup):
                assert self.in_place is not None  # only a group that resizes in place regroups
                model = self.in_place.regroup(epoch_summary)
                if model is None:  # this node goes away; the others train on without it
                    return exit_codes.PREEMPTED
                continue
            if epoch_summary is None:
                return self.preempted(summary)
            summary = epoch_summary
            self.pos = state.Position(epoch, 0, self.pos.step)
            if self.in_place is None:
                self.end_epoch(epoch, summary)
            else:  # a peer lost here: re-form, then evaluate and save again
                model = self.in_place.retry(lambda epoch=epoch, summary=summary: self.end_epoch(epoch, summary), model)
        p = self.progress
        ways: dict[str, int | str] = {"graph_replays": self.captured.replays} if self.captured is not None else {}
        if isinstance(model, compile_choice.CompileChoice):
            ways["compile"] = model.chosen or "undecided"
        p.done(self.pos.epoch, self.pos.step, summary, **ways)
        return 0

    def end_epoch(self, epoch: int, summary: dict) -> None:
        args, p = self.args, self.progress
        if args.eval_every and (epoch % args.eval_every == 0 or epoch == args.epochs):
            p.publish(epoch, self.pos.step, progress_record.EVALUATING)
            summary.update(evaluate(self.model, self.data.eval, self.d, self.autocast))
        if args.checkpoint_dir and (epoch % args.checkpoint_every == 0 or epoch == args.epochs):
            p.publish(epoch, self.pos.step, progress_record.SAVING)
            self.save(summary)
        p.end_epoch(epoch=epoch, step=self.pos.step, **summary)
        after_epoch(epoch, self.d.is_main)

    def save(self, summary: dict) -> None:
        # Its collectives wait on the peers as a step does (a stop finds them stuck just the
        # same); rank 0's write, however long, is not a wait on anyone.
        clock = self.stop.clock
        with clock.waiting():
            path = state.save(
                self.d,
                self.args.checkpoint_dir,
                self.args.keep_checkpoints,
                self.pos,
                self.model,
                self.optimizer,
                self.scaler,
                self.args,
                summary,
                self.fence,
                writing=clock.saving,
            )
        if path:
            self.progress.say(f"checkpoint {path}")

    def close(self) -> None:
        for part in (self.samples, self.progress, self.heartbeat, self.in_place):
            if part is not None:
                part.close()

    def preempted(self, summary: dict) -> int:
        if self.args.checkpoint_dir:
            self.save(summary)
        self.progress.record(
            "preempted", epoch=self.pos.epoch, batch=self.pos.batch, step=self.pos.step, exit_code=exit_codes.PREEMPTED
        )
        return exit_codes.PREEMPTED


def main(argv: list[str] | None = None) -> int:
    args = cli.parse(argv)  # exits 2 itself on a bad flag
    stop = stopping.StopRequest(log)
    stacks.dump_on_signal()  # a hung rank says where it waits (stacks.py)
    stacks.dump_on_crash()  # a crash says where it crashed (without ddpjob-launch too)
    trainer, code, in_place = None, 1, False
    try:
        env = read_process_env()
        # Resizing in place, the Trainer forms the group once it has a model to share.
        in_place = resize.wanted() and bool(env.elastic_max_nodes)
        d = distributed.setup_in_place(env) if in_place else distributed.setup(env)
        return (code := (trainer := Trainer(args, d, stop)).run())
    except (UsageError, NoGroup) as e:
        log(f"error: {e}")
        return (code := exit_codes.BAD_INPUT if isinstance(e, UsageError) else exit_codes.RENDEZVOUS_TIMEOUT)
    except fence.Superseded as e:  # retryable: the job moved on without this process (fence.py)
        log(f"stopping: {e}")
        return (code := exit_codes.PREEMPTED)
    except resize.TrainingOver as e:  # the group finished without this node: so has it
        log(f"nothing left to do: {e}")
        return (code := 0)
    except BaseException:
        if group_reset.ABANDONED or in_place:  # the exit below skips the interpreter's own report
            traceback.print_exc()
        raise
    finally:
        if trainer is not None:
            trainer.close()
        trainer = None  # its model (a DDP) goes before the process group (distributed.teardown)
        # Every member of a group resized in place ends alike, without tearing its groups
        # down: a survivor's abandoned groups may be blocked on a lost peer, and a newcomer
        # that tore its gloo group down after those survivors had gone crashed (exit 139,
        # after the training was over, on the kind tier; its Pod's failure restarted the gang).
        if group_reset.ABANDONED or in_place:
            from .quick_exit import exit_now

            exit_now(code)
        distributed.teardown()


if __name__ == "__main__":
    from .quick_exit import exit_with

    exit_with(main(), quick=(exit_codes.PREEMPTED,))  # asked to stop, saved, process group gone: go now
