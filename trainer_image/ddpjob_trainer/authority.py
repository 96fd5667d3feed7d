"""ddpjob-train's side of the checkpoint fence (fence.py): who this process writes as, and
the claims that make it the job's writer.

- `claim`: an attempt's first group (rigid, or the first group that resizes in place)
  claims a term before it reads the checkpoint, through global rank 0;
- `succeed`: a group re-formed in place (or one a newcomer joins) claims the term after
  its own, through the member with the most steps (a member knows the group's term; a
  newcomer does not);
- `writer`: what every metrics line and progress record carries besides the attempt
  (`restart`): the generation and the term, so a reader can tell a writer the job moved on
  without; `stamp` tells the progress reporter, at each claim and re-form.

Every rank learns the claimant's outcome (a rank that raised alone would leave the others
waiting in the next collective): the claim, or fence.Superseded on every rank.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Protocol

from . import distributed, fence
from .collectives import broadcast_object
from .elastic import Elastic
from .fence import Claim
from .progress import Progress


class Group(Protocol):
    """A group that resizes in place (resize.py's InPlace), as far as its claims go."""

    @property
    def el(self) -> Elastic: ...
    def key(self) -> str: ...


class Run(Protocol):
    """What the claims read of the run (train.py's Trainer), and the one field they set:
    named here, so that this module needs nothing of train.py or resize.py, which import it."""

    fence: Claim | None

    @property
    def args(self) -> Any: ...
    @property
    def d(self) -> distributed.Dist: ...
    @property
    def progress(self) -> Progress: ...
    @property
    def in_place(self) -> Group | None: ...


def generation(t: Run) -> int:
    """The group within the attempt: an in-place group's number, else torchrun's restart
    count of this Pod's workers (an elastic job's restart path; 0 for a rigid one)."""
    if t.in_place is not None and t.in_place.el.gen is not None:
        return t.in_place.el.gen.number
    raw = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return int(raw) if raw.isdigit() else 0


def writer(t: Run) -> dict[str, int]:
    """{"generation"} for an elastic job, {"term"} once the group holds one."""
    out = {"generation": generation(t)} if t.d.in_place or t.d.env.elastic_max_nodes else {}
    return {**out, "term": t.fence.term} if t.fence is not None else out


def stamp(t: Run, p: Progress) -> Progress:
    """Tell a progress reporter who writes, and which claim its records are checked against."""
    p.authority = writer(t)
    p.fenced = (t.args.checkpoint_dir, t.fence) if t.fence is not None else None
    return p


def claim(t: Run) -> None:
    """A fresh start's term, claimed by rank 0; Superseded when the job moved on without it."""
    me, got = fence.identity(generation=generation(t)), None
    if t.in_place is not None:  # so a claim of its next group is known as its own (fence.succeed)
        me = dataclasses.replace(me, group=t.in_place.key())
    if t.d.is_main:
        got = fence.attempt(lambda: fence.claim(t.args.checkpoint_dir, me))
    try:
        t.fence = fence.outcome(distributed.broadcast_object(t.d, got))
    except OSError as e:  # a read-only volume resumes as before; a save there fails as before
        t.progress.say(f"warning: no term of the checkpoint fence ({e}): this run's checkpoints are not fenced")
    stamp(t, t.progress)


def succeed(t: Run, parent: str) -> None:
    """A re-formed group's next term (`parent`: the group it re-formed from, fence.succeed);
    Superseded when another group of this job claimed it first."""
    assert t.in_place is not None  # only a group that resizes in place re-forms
    el, mine, got = t.in_place.el, t.fence, None
    src = el.current.source
    assert src is not None  # re-formed from a group (resize.py's from_peer): a member has state
    if el.rank == src and mine is not None:  # (None: a group whose volume took no claim)
        key = t.in_place.key()
        got = fence.attempt(lambda: fence.succeed(t.args.checkpoint_dir, mine, el.current.number, key, parent))
    verdict = broadcast_object(got, src, el.rank, el.control, el.interrupts)
    try:
        t.fence = fence.outcome(verdict) if verdict is not None else None
    except OSError as e:  # the volume failed the claim: the group keeps the term it holds
        t.progress.say(f"warning: the checkpoint fence's next term was not claimed ({e})")
