"""`Elastic`: what a training loop calls to keep its processes when an elastic job loses or
gains a node (a resize in place), as TorchFT's Manager does; `ddpjob-train` uses it.

    el = Elastic(get_state, set_state)      # the state a newcomer takes from a live peer
    el.join()                               # forms or joins the group: el.rank, el.world_size
    model_ddp = el.wrap(model)              # DDP over the group, every collective of it interruptible
    while not done:
        vote = el.vote(leaving=asked_to_stop)   # started before the step, read after it
        try:
            ...forward, backward, optimizer step; step += 1
            verdict = vote.result()
        except GroupLost:                   # a peer was lost: this step is not committed
            optimizer.zero_grad(); el.resize(step); model_ddp = el.wrap(model); continue
        if verdict.stop: save a checkpoint; exit 143       # too few would remain
        if verdict.leaves(el.node): exit 143               # this node is going away
        if verdict.change: el.resize(step, verdict.leaving); model_ddp = el.wrap(model)

After `join` or `resize`, every member holds the same state: when some member lacks it (a
newcomer, or a member whose last step did not commit while another's did), the member with
the most committed steps sends it (`set_state` is called on the others). `step` is the
number of optimizer steps this process has committed. A first group (nobody has state)
reads the checkpoint instead, as a restarted job does. Every rank of a node leaves or
stays together: a node is the unit of membership.

How a loss is found: a collective that fails (a peer's connection reset), the roster's
`fail/<n>` written by whoever saw it first or by the launcher on the operator's notice,
and, for a peer that went silent, a probe of the members' stores once a collective has
waited HANG_PROBE seconds (watcher.py). See roster.py for how the group agrees.
"""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from ddpjob import contract

from . import UsageError, group_reset, private_api, tracked_ddp
from .collectives import broadcast_state
from .env import read_launch_env
from .interrupt import GroupLost, Interrupts
from .node_stores import NodeStores
from .roster import Generation
from .rounds import Rounds
from .watcher import Watcher

FORM_SECONDS = 600.0  # how long a worker waits for a group it can be in
LEAVE, CHANGE = 1, 2  # a rank's vote


@dataclass(frozen=True)
class Verdict:
    leaving: tuple[int, ...]  # nodes that leave at this step boundary
    change: bool  # re-form now (a newcomer waits, or nodes leave)
    stop: bool  # fewer than the minimum would remain: everyone stops (and saves)

    def leaves(self, node: int) -> bool:
        return node in self.leaving


class Vote:
    """Every rank's LEAVE/CHANGE bits, all-reduced on the CPU group while the step runs."""

    def __init__(self, el: Elastic, leaving: bool):
        self.el, self.gen = el, el.current
        self.flags = torch.zeros(el.world_size, dtype=torch.int32)
        self.flags[el.rank] = (LEAVE if leaving else 0) | (CHANGE if el.watcher.change_wanted else 0)
        self.work = dist.all_reduce(self.flags, group=el.control, async_op=True)

    def result(self) -> Verdict:
        self.el.interrupts.wait(self.work)
        gen, flags = self.gen, self.flags.tolist()
        leaving = tuple(sorted({gen.nodes[r // gen.nproc] for r, f in enumerate(flags) if f & LEAVE}))
        change = bool(leaving) or any(f & CHANGE for f in flags)
        return Verdict(leaving, change, bool(leaving) and len(gen.nodes) - len(leaving) < self.el.min_nodes)


class Elastic:
    def __init__(
        self,
        get_state: Callable[[], dict],
        set_state: Callable[[dict], None],
        *,
        backend: str = "gloo",
        device: torch.device | None = None,
        timeout: datetime.timedelta | None = None,
        env=None,
        log: Callable[[str], None] = print,
        connect=None,
    ):
        env = os.environ if env is None else env
        launch = read_launch_env(env)
        if launch.min_nodes is None or not env.get(contract.NODE_ADDRESS):
            raise UsageError(
                "a resize in place needs an elastic job's environment (NNODES=MIN:MAX, DDPJOB_NODE_ADDRESS)"
            )
        private_api.require_torch()  # a torch that changed them is refused here, not at the first resize
        self.get_state, self.set_state, self.log = get_state, set_state, log
        self.backend, self.device = backend, device or torch.device("cpu")
        self.timeout = timeout or datetime.timedelta(seconds=600)
        self.node, self.local = launch.node_rank, int(env.get(contract.LOCAL_RANK, "0"))
        self.nproc, self.min_nodes, self.max_nodes = launch.nproc_per_node, launch.min_nodes, launch.nnodes
        self.stores = NodeStores(env[contract.NODE_ADDRESS], self.max_nodes, connect, own=self.node)
        boot = self.stores.boot(self.node)
        if boot is None:
            raise UsageError(
                f"this node's store ({env[contract.NODE_ADDRESS]}, node {self.node}) does not answer: "
                "start the worker through ddpjob-launch"
            )
        self.rounds = Rounds(self.stores, self.node, self.local, self.nproc, self.min_nodes, self.max_nodes, boot)
        self.interrupts = Interrupts()
        self.gen: Generation | None = None  # None until the first join
        self.control: dist.ProcessGroup | None = None  # the CPU group of votes and state, per generation
        self.own: dist.ProcessGroup | None = None  # DDP's group of this rank alone, per generation (tracked_ddp.py)
        self.watcher = Watcher(self, self.stores.address(self.node), connect)
        self.timings: dict[str, float] = {}  # of the last join/resize: agree, group, state (seconds)

    @property
    def current(self) -> Generation:
        """The group this worker is in (after `join`)."""
        if self.gen is None:
            raise RuntimeError("Elastic: no group yet (call join() first)")
        return self.gen

    @property
    def rank(self) -> int:
        if self.gen is None:
            return 0
        rank = self.gen.rank(self.node, self.local)
        if rank is None:  # _install only keeps a generation this node is in
            raise RuntimeError(f"node {self.node} is not in group {self.gen.number}")
        return rank

    @property
    def world_size(self) -> int:
        return self.gen.world_size if self.gen else 1

    def join(self, step: int = -1, over: Callable[[], bool] = lambda: False) -> Generation:
        """Form the first group, or join the running one as a newcomer; NoGroup when none
        forms in time, or when no node answers and `over()` says training is over."""
        t0 = time.monotonic()
        gen = self.rounds.form(self.rounds.newest(), step, t0 + FORM_SECONDS, over=over)
        return self._install(gen, t0)

    def vote(self, leaving: bool = False) -> Vote:
        return Vote(self, leaving)

    def resize(
        self,
        step: int,
        leaving: tuple[int, ...] = (),
        failed: bool = False,
        stopping: Callable[[], bool] = lambda: False,
        over: Callable[[], bool] = lambda: False,
    ) -> Generation:
        """Re-form without the nodes that left or were lost (and with any newcomer), after a
        step boundary's verdict or a GroupLost (`failed`); the same process goes on. LeftOut
        (roster.py) when the others re-formed without this node while `stopping()`: it goes.
        NoGroup when none answers any more and `over()` says training is over (they finished)."""
        t0 = time.monotonic()
        prev = self.current
        # The members a watcher judged lost (frozen, gone): never called again in this resize.
        lost = [n for n in prev.nodes if self.watcher.lost(prev.number, n)]
        if failed:  # whoever saw it tells every other member, so none waits for a timeout
            self.stores.announce([n for n in prev.nodes if n not in lost], f"fail/{prev.number}")
        shrinking = self.backend == "nccl" and group_reset.can_shrink()
        if not shrinking:
            group_reset.abandon()
        gen = self.rounds.form(prev, step, t0 + FORM_SECONDS, lost=lost, leaving=leaving, stopping=stopping, over=over)
        # The old ranks of the nodes that are gone (node-major, as Generation.rank numbers them).
        gone = [i for i, n in enumerate(prev.nodes) if n not in gen.nodes]
        excluded = [i * self.nproc + r for i in gone for r in range(self.nproc)]
        if shrinking and (not excluded or not set(gen.nodes) <= set(prev.nodes)):
            group_reset.abandon()  # nobody to drop, or a newcomer to add: a new communicator
            shrinking = False
        return self._install(gen, t0, excluded if shrinking else None)

    def _install(self, gen: Generation, t0: float, shrink: list[int] | None = None) -> Generation:
        t1 = time.monotonic()
        self.gen = gen
        self.interrupts.reset(gen.number)
        store = dist.PrefixStore(f"g{gen.number}/", self.stores.store(gen.round_node))
        if shrink is not None:  # NCCL: the survivors' communicator, without the lost ranks
            group_reset.shrink(shrink, [g for g in (self.control, self.own) if g is not None], store)
        else:
            dist.init_process_group(
                self.backend,
                store=store,
                rank=self.rank,
                world_size=gen.world_size,
                timeout=self.timeout,
                device_id=self.device if self.device.type == "cuda" else None,
            )
        control = dist.new_group(backend="gloo", timeout=self.timeout)
        assert isinstance(control, dist.ProcessGroup)  # every rank is in it: never GroupMember.NON_GROUP_MEMBER
        self.control = control
        # DDP's own group (tracked_ddp.py): this rank alone, made by this rank alone.
        own = dist.new_group([self.rank], backend=self.backend, timeout=self.timeout, use_local_synchronization=True)
        assert isinstance(own, dist.ProcessGroup)
        self.own = own
        t2 = time.monotonic()
        src = gen.source
        if gen.needs_state and src is not None:  # (needs_state implies a source)
            state = broadcast_state(
                self.get_state() if self.rank == src else None,
                src,
                self.rank,
                dist.group.WORLD,
                self.control,
                self.device,
                self.interrupts,
            )
            if gen.steps[self.rank] != gen.steps[src] and state is not None:
                self.set_state(state)
        if self.local == 0:
            self.stores.call(self.node, lambda s: s.set("pointer", gen.text()))
        self.watcher.follow(gen)
        self.timings = {"agree": t1 - t0, "group": t2 - t1, "state": time.monotonic() - t2}
        return gen

    def wrap(self, module: torch.nn.Module, **ddp_kwargs) -> DDP:
        """DDP over the current group, each of its collectives ended by a lost peer (tracked_ddp.py)."""
        return tracked_ddp.wrap(module, self.interrupts, dist.group.WORLD, self.own, **ddp_kwargs)

    def wait(self, work) -> None:
        self.interrupts.wait(work)

    def failure(self, exc: BaseException) -> bool:
        """Whether `exc` from a collective means the group lost a peer (re-form) rather than
        a bug (raise): tripped, or a distributed error, or gloo's own words."""
        if isinstance(exc, GroupLost) or self.interrupts.reason is not None:
            return True
        if isinstance(exc, dist.DistError):
            return True
        text = str(exc)
        return isinstance(exc, RuntimeError) and ("gloo" in text or "Connection" in text or "NCCL" in text)

    def close(self) -> None:
        self.watcher.stop()
