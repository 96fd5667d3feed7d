"""ddpjob-train's side of a resize in place (elastic.py): what it hands a newcomer, how
it re-forms, and what it redoes.

- A step boundary: every rank votes (LEAVE when asked to stop, CHANGE when a newcomer
  waits). Nodes that leave exit (143) without a checkpoint while the others re-form at
  once; when fewer than `minNodes` would remain, every rank saves and stops, as a rigid
  job does when asked to stop.
- A step whose collective fails (a lost peer) is not committed: its gradients are
  dropped and the new group does that step again, its micro-batches split over the new
  size (elastic_data.py), so every sample still counts once. A member whose optimizer
  step did commit while another's did not is the one every member takes its state from.
- A node being stopped (its Pod deleted) that the others re-formed without, because the
  operator's notice reached them before its vote did, leaves too (roster.LeftOut): it
  does not come back as a newcomer only to leave at the next step.
- A newcomer takes the model, optimizer, scaler and position from the member with the
  most steps, not from the checkpoint. Only a first group (nobody has state) reads it.
- Each re-formed group (and one a newcomer joins) claims the term of the checkpoint fence
  after its own (fence.py) before it trains on: of two groups re-formed from one
  generation (the two sides of a partition), the first to claim goes on and saves; the
  other ends (fence.Superseded).

Each (re-)formed group opens a new sample log generation at the agreed step, so the
audit counts the redone step once (sample_audit.py: the last group that made a step).
"""

from __future__ import annotations

import os
import sys
import time

from . import authority, checkpoint, fence, state
from .distributed import collective_timeout
from .elastic import Elastic, Vote
from .in_place_launch import IN_PLACE, RESIZE_ENV
from .roster import LeftOut, NoGroup
from .sample_log import SampleLog


def wanted(env=None) -> bool:
    """Whether this worker was started to resize in place (by ddpjob-launch)."""
    return (os.environ if env is None else env).get(RESIZE_ENV) == IN_PLACE


class Regroup(Exception):
    """Re-form now: after a failed collective (`failed`), or at a boundary where `leaving`
    nodes go; `leave`: this node is one of them."""

    def __init__(self, failed: bool = False, leaving: tuple[int, ...] = (), leave: bool = False):
        super().__init__("re-form the group")
        self.failed, self.leaving, self.leave = failed, leaving, leave


class TrainingOver(Exception):
    """The group this node would re-form finished without it (the others were done and
    left, their last checkpoint says so): nothing is left for it to do, and it ends as they
    did (exit 0), not as a failure that would restart the finished job's gang."""


class BoundaryVote:
    """The trainer's vote (distributed.StopVote's interface) over the in-place group:
    `result()` is True to stop everywhere (and save), raises Regroup to re-form."""

    def __init__(self, owner: InPlace):
        self.owner = owner
        self.vote: Vote | None = None

    def start(self, stopping: bool) -> None:
        self.vote = self.owner.el.vote(stopping)

    def result(self) -> bool:
        if self.vote is None:
            raise RuntimeError("BoundaryVote.result() before start()")
        verdict, el = self.vote.result(), self.owner.el
        if verdict.stop:
            return True
        if verdict.change:
            raise Regroup(leaving=verdict.leaving, leave=verdict.leaves(el.node))
        return False


class InPlace:
    def __init__(self, trainer):
        self.t = trainer
        d = trainer.d
        self.el = Elastic(
            self.state,
            self.take,
            backend=d.backend,
            device=d.device,
            timeout=collective_timeout(),
            log=trainer.progress.say,
        )
        d.group = self.el
        self.parent = ""  # the group this worker re-forms from (its group_key): fence.succeed

    def state(self) -> dict:
        t = self.t
        return {
            "model": t.model.state_dict(),
            "optimizer": t.optimizer.state_dict(),
            "scaler": t.scaler.state_dict(),
            "pos": [t.pos.epoch, t.pos.batch, t.pos.step],
        }

    def take(self, peer: dict) -> None:
        t = self.t
        t.model.load_state_dict(peer["model"])
        t.optimizer.load_state_dict(peer["optimizer"])
        t.scaler.load_state_dict(peer["scaler"])
        t.pos = state.Position(*peer["pos"])

    @property
    def from_peer(self) -> bool:
        """Whether the group's state came from a member (else: the checkpoint, if any)."""
        return self.el.gen.source is not None

    def over(self) -> bool:
        """Whether the checkpoint says training is over (its last epoch saved)."""
        directory = self.t.args.checkpoint_dir
        return bool(directory) and checkpoint.newest_epoch(directory) >= self.t.args.epochs

    def join(self) -> bool:
        """Form or join the group; False when none is left because training is over (a
        node created again that came too late: the others finished and left)."""
        over = self.over
        try:  # node 0 created again after the others finished would otherwise wait alone
            gen = None if over() else self.el.join(-1, over)
        except NoGroup:
            if not over():
                raise
            gen = None
        if gen is None:
            self.t.progress.say("no group to join, and the checkpoint says training is over: nothing to do")
            return False
        self._adopt()
        self.t.progress.say(
            f"joined group {gen.number}: nodes {list(gen.nodes)}, rank {self.el.rank}/{gen.world_size}"
            + (", state from a peer" if gen.needs_state else "")
        )
        return True

    def failure(self, exc: BaseException) -> Regroup:
        """The Regroup a step's exception calls for; the exception itself when it is a bug."""
        if isinstance(exc, Regroup):
            return exc
        if self.el.failure(exc):
            return Regroup(failed=True)
        raise exc

    def retry(self, work, model):
        """Run `work` (collectives outside a step: evaluation, a checkpoint) until it ends
        without losing a peer; the model to train through (re-wrapped after each loss)."""
        while True:
            try:
                work()
                return model
            except Exception as exc:  # noqa: BLE001 - failure() re-raises what is a bug
                model = self.regroup(self.failure(exc))

    def regroup(self, why: Regroup):
        """Re-form and return the model to train through (a new DDP over the new group);
        again, as often as a peer is lost meanwhile. None: this node leaves."""
        t, prev = self.t, self.el.gen
        learned = time.time()  # when this worker knew: the benchmark's end of detection
        if why.leave:
            t.progress.say("leaving the group: this node was asked to stop")
            return None
        while True:
            t.micro.model = t.model  # let go of the old DDP and its buckets
            t.optimizer.zero_grad(set_to_none=True)
            if t.samples is not None:
                t.samples.close()
                t.samples = None
            try:
                self.parent = self.key()
                self.el.resize(t.pos.step, why.leaving, why.failed, stopping=lambda: t.stop.signum != 0, over=self.over)
                self._adopt()
                model = t.wrap()
                break
            except LeftOut as exc:  # its Pod is being deleted: the others went on without it
                t.progress.say(f"leaving the group: {exc}")
                return None
            except NoGroup as exc:  # never a lost peer to re-form without: nobody is left
                if not self.over():
                    raise
                raise TrainingOver(f"{exc}: the others finished, and the checkpoint says training is over") from None
            except Exception as exc:  # noqa: BLE001 - failure() re-raises what is a bug
                why = self.failure(exc)
        gen = self.el.gen
        cause = (
            "a peer was lost"
            if why.failed
            else (f"node(s) {list(why.leaving)} left" if why.leaving else "a newcomer joined")
        )
        timings = " ".join(f"{k} {v:.2f}s" for k, v in self.el.timings.items())
        t.progress.say(
            f"resized in place: group {prev.number} -> {gen.number}, {len(prev.nodes)} -> "
            f"{len(gen.nodes)} nodes ({cause}); step {t.pos.step}; {timings}"
        )
        t.progress.record("resize", epoch=t.pos.epoch, step=t.pos.step, nodes=len(gen.nodes), world_size=t.d.world_size)
        print(
            f"ddpjob-train: resized group {gen.number} nodes={list(gen.nodes)} step={t.pos.step} {timings}"
            f" at={learned:.3f}",
            file=sys.stderr,
            flush=True,
        )
        return model

    def key(self) -> str:
        """The current generation's fence.group_key ("" before the first)."""
        gen = self.el.gen
        return fence.group_key(gen.number, gen.nodes, gen.boots) if gen is not None else ""

    def _adopt(self) -> None:
        """Everything that depends on the rank and size follows the new generation."""
        t, d = self.t, self.t.d
        d.control = self.el.control
        if t.args.checkpoint_dir and self.from_peer:  # a first group claims in Trainer.run
            authority.succeed(t, self.parent)
        t.data.train.reshard(d.world_size, d.rank)
        if t.data.eval is not None:
            t.data.eval.reshard(d.world_size, d.rank)
        t.micro.world_size = d.world_size
        t.heartbeat.rank = d.rank
        t.remake_progress()
        authority.stamp(t, t.progress)  # a new generation, and term
        if t.args.sample_log and self.from_peer:  # a first group opens it after the checkpoint's read
            t.samples = SampleLog(t.args.sample_log, d, t.pos.step, t.progress.stamp())

    def close(self) -> None:
        self.el.close()
