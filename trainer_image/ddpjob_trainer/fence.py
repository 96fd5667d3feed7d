"""The checkpoint fence: which writer may still commit checkpoints to a job's directory.

A job moves on without a process it can no longer reach (a node cut off the network while
its kubelet and Pod live on): a rigid job's gang restarts as a new attempt, the old Pod
force-deleted from the API while it may still run; an elastic group re-forms a new
generation in place. The checkpoint volume does not care about the Pod network, so the
process left behind may still write there: a save on SIGTERM, with a step number higher
than the new attempt's. The fence keeps it out.

Terms. Each authority that may write checkpoints (a gang attempt's first group, each
generation of a group that resizes in place) claims the next *term* before it reads or
writes one: global rank 0 creates `fence/<term>.json` exclusively (a hard link, which
the server arbitrates on a local disk and on NFS alike: of two claimants of one term,
exactly one wins) and points `fence/current.json` at it. The newest term holds the fence.
Every checkpoint's name carries its writer's term, and readers order by term first, then
step (checkpoint.py), so a superseded writer's file never wins; a writer checks the fence
before its commit (the rename) and after it, and refuses it when a newer term exists.

Who may claim. A generation re-formed in place *succeeds* its group's term: it claims
term + 1 only while that term is still the newest, so of two groups re-formed from one
generation (the two sides of a partition) the first to claim writes checkpoints and the
other ends. A fresh start (an attempt's first group) knows no term: it claims the next one
unless it is stale, the fence held by the same job (DDPJOB_NAMESPACE/DDPJOB_NAME) and
incarnation at a later attempt. The incarnation is a digest of the job's notice token
(elastic jobs: one per DDPJob in a cluster, one per `ddpjob run`). A rigid job has none,
and its attempt 0 is taken for a new run and always claims: a rerun with `ddpjob run`, or
a job created again under its name over the same volume, counts its attempts from 0 again.

A process the fence refuses ends with `Superseded` (train.py: exit 143, retryable: the
operator never counts an old attempt's Pods, and a verdict against the side of a
partition the job kept costs a restart, not the job).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

from ddpjob import contract

SUBDIR = "fence"
POINTER = "current.json"
KEEP = 8  # claims kept on disk (only the newest decides; the rest say who held it before)
TRIES = 16  # fresh claimants racing for one term: each loser reads the winner and judges again
MAX_BYTES = 4096
MAX_TERM = 2**53  # JSON's safe integers: a pointer past it is no claim of ours
_TERM = re.compile(r"^(\d{10})\.json$")


class Superseded(Exception):
    """The job moved on without this process: a newer term holds the checkpoint fence."""


@dataclass(frozen=True)
class Claim:
    """Who holds (or asks for) a term: the job, its incarnation, the gang attempt and the
    generation (an in-place group's number; torchrun's restart count on the restart path)."""

    term: int = 0
    job: str = ""
    run: str = ""
    attempt: int = 0
    generation: int = 0
    group: str = ""  # an in-place generation's members (`group_key`): the two sides of a partition differ

    def who(self) -> str:
        return f"attempt {self.attempt}, generation {self.generation}" + (f" of {self.job}" if self.job else "")

    @staticmethod
    def parse(raw: bytes, term: int) -> Claim:
        """A claim file's content, bounded and type-checked; what it cannot say is unknown
        (`job` "?": no job of ours has that name, so no fresh start is judged against it)."""
        try:
            d = json.loads(raw[:MAX_BYTES])
            job, run, attempt, gen, group = d["job"], d["run"], d["attempt"], d["generation"], d.get("group", "")
            if not all(isinstance(v, str) for v in (job, run, group)) or not (type(attempt) is type(gen) is int):
                raise TypeError
            return Claim(term, job[:320], run[:64], attempt, gen, group[:64])
        except (ValueError, KeyError, TypeError):
            return Claim(term, job="?")


def identity(env=None, generation: int = 0) -> Claim:
    """This process's job, incarnation and attempt, from the contract."""
    env = os.environ if env is None else env
    name, namespace = env.get(contract.JOB_NAME) or "", env.get(contract.JOB_NAMESPACE) or ""
    token = env.get(contract.NOTICE_TOKEN) or ""
    try:
        attempt = max(0, int(env.get(contract.RESTART_COUNT) or 0))
    except ValueError:
        attempt = 0
    return Claim(
        0,
        f"{namespace}/{name}" if name else "",
        # A digest of the token: the token itself authenticates notices and stays off the volume.
        hashlib.sha256(token.encode()).hexdigest()[:16] if token else "",
        attempt,
        generation,
    )


def group_key(number: int, nodes, boots) -> str:
    """Who an in-place generation is: its number, nodes and their stores' boots (roster.py)."""
    return hashlib.sha256(json.dumps([number, list(nodes), list(boots)]).encode()).hexdigest()[:16]


def stale(me: Claim, held: Claim) -> bool:
    """Whether a fresh start `me` comes after its job moved on to `held`."""
    if held.job != me.job or held.run != me.run:
        return False
    if not me.run and me.attempt == 0:
        return False  # a rigid job's attempt 0: a new run (the module's docstring)
    return held.attempt > me.attempt


def _path(directory: str, term: int) -> str:
    return os.path.join(directory, SUBDIR, f"{term:010d}.json")


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read(MAX_BYTES)
    except OSError:
        return None


def terms(directory: str) -> list[int]:
    """The claimed terms on disk, oldest first."""
    try:
        names = os.listdir(os.path.join(directory, SUBDIR))
    except OSError:
        return []
    return sorted(int(m.group(1)) for m in map(_TERM.match, names) if m)


def holder(directory: str) -> Claim | None:
    """The newest claim (None: no fence yet). The pointer file is read too: opening a file
    revalidates it on NFS (close-to-open), where a directory listing may be cached."""
    newest = max(terms(directory), default=0)
    raw = _read(os.path.join(directory, SUBDIR, POINTER))
    if raw is not None:
        with contextlib.suppress(ValueError, KeyError, TypeError):
            pointed = json.loads(raw)["term"]
            if type(pointed) is int and newest < pointed <= MAX_TERM:
                newest = pointed
    if newest <= 0:
        return None
    raw = _read(_path(directory, newest))
    return Claim.parse(raw, newest) if raw is not None else Claim(newest, job="?")


def _create(directory: str, claim: Claim) -> bool:
    """Create `claim`'s file if no one has yet (True: this process holds the term)."""
    folder = os.path.join(directory, SUBDIR)
    os.makedirs(folder, exist_ok=True)
    final = _path(directory, claim.term)
    data = json.dumps(asdict(claim), separators=(",", ":")).encode()
    tmp = f"{final}.tmp.{os.getpid()}.{secrets.token_hex(4)}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, final)  # fails if the name exists: the whole file appears at once
        except FileExistsError:
            return False
        except OSError:  # a filesystem without hard links: an exclusive create, then its bytes
            try:
                fd = os.open(final, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                return False
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
    finally:
        with contextlib.suppress(OSError):
            os.remove(tmp)
    pointer = os.path.join(folder, POINTER)
    tmp = f"{pointer}.tmp.{os.getpid()}.{secrets.token_hex(4)}"
    with open(tmp, "wb") as f:
        f.write(json.dumps({"term": claim.term}).encode())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, pointer)
    for old in terms(directory)[:-KEEP]:
        with contextlib.suppress(OSError):
            os.remove(_path(directory, old))
    return True


def claim(directory: str, me: Claim) -> Claim:
    """A fresh start's claim of the next term; Superseded when it is stale."""
    for _ in range(TRIES):
        held = holder(directory)
        if held is not None and stale(me, held):
            raise Superseded(
                f"the job moved on without this process: term {held.term} of the checkpoint fence in "
                f"{directory} is held by {held.who()}, and this is {me.who()}"
            )
        mine = replace(me, term=(held.term if held else 0) + 1)
        if _create(directory, mine):
            return mine
    raise Superseded(f"could not claim a term of the checkpoint fence in {directory} in {TRIES} tries")


def succeed(directory: str, mine: Claim, generation: int, group: str, parent: str = "") -> Claim:
    """A group re-formed in place (`generation`, `group`) claims the term after its own,
    `mine`, while that is still the newest; Superseded when another group got there first.
    `parent`: the group this one re-formed from, whose claim may be on disk unheard (a peer
    lost while its claimant told the others): that one is this group's own line."""
    held = holder(directory)
    if held is not None and held.term == mine.term + 1 and parent and held.group == parent:
        mine = held
    if held is not None and held.term > mine.term:
        raise Superseded(
            f"the job moved on without this group: term {held.term} of the checkpoint fence in {directory} "
            f"is held by {held.who()}, and this group's was {mine.term} ({mine.who()})"
        )
    nxt = replace(mine, term=max(mine.term, held.term if held else 0) + 1, generation=generation, group=group)
    if not _create(directory, nxt):
        other = holder(directory)
        raise Superseded(
            f"another group of this job claimed term {nxt.term} of the checkpoint fence in {directory} first"
            + (f" ({other.who()})" if other else "")
        )
    return nxt


def check(directory: str, mine: Claim, what: str) -> None:
    """Superseded when a newer term than `mine` holds the fence: `what` is not committed."""
    held = holder(directory)
    if held is not None and held.term > mine.term:
        raise Superseded(
            f"not committing {what}: term {held.term} of the checkpoint fence is held by {held.who()}, and "
            f"this writer's is {mine.term} ({mine.who()}): the job moved on without it"
        )


# What the claiming rank sends the others: its claim, or its failure as (kind, message).
Verdict = Claim | tuple[str, str]


def attempt(claiming: Callable[[], Claim]) -> Verdict:
    try:
        return claiming()
    except (Superseded, OSError) as e:
        return (type(e).__name__, str(e))


def outcome(got: Verdict) -> Claim:
    """The claim a rank was sent; the claimant's failure raised on every rank alike."""
    if isinstance(got, tuple):
        raise Superseded(got[1]) if got[0] == Superseded.__name__ else OSError(got[1])
    return got
