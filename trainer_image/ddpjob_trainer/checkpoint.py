"""Checkpoints made for resumption.

One file per checkpoint, `ckpt-e{epoch}-s{step}-t{term}-{digest}.pt`: written by global
rank 0 to a temporary name, fsynced, then renamed, so a reader sees either nothing or the
whole file. The name carries a SHA-256 prefix of the bytes, so a file damaged later (a bad
disk, a half-synced volume, someone's `truncate`) is detected before torch.load is asked
to make sense of it; such a file is skipped with a warning and the previous one is used.
A checkpoint that is intact but made by another model is an error, never skipped: a
silent fresh start would throw away someone's training.

The term is the writer's authority (fence.py): the newest is the checkpoint of the
newest term, then of the most steps, so a writer the job moved on without never wins
with a higher step, nor is kept by `prune` over a current one; it checks the fence before
and after its rename and refuses the commit when a newer term holds it. Names without a
term (written before the fence) still load, below every fenced one.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import sys

import torch

from . import UsageError, fence

FORMAT = 1
_NAME = re.compile(r"^ckpt-e(\d+)-s(\d+)(?:-t(\d+))?-([0-9a-f]{16})\.pt$")


def log(msg: str) -> None:
    print(f"ddpjob-train: {msg}", file=sys.stderr, flush=True)


def _fsync_dir(directory: str) -> None:
    # The rename is durable only once the directory entry itself is on disk.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _ranked(directory: str) -> list[tuple[int, int, int, str]]:
    """(term, step, epoch, path) of every finished checkpoint name, newest first: the
    newest term (no term: 0), then the most steps."""
    if not os.path.isdir(directory):
        return []
    found = []
    for name in os.listdir(directory):
        m = _NAME.match(name)
        if m:
            term = int(m.group(3) or 0)
            found.append((term, int(m.group(2)), int(m.group(1)), os.path.join(directory, name)))
    found.sort(reverse=True)
    return found


def candidates(directory: str) -> list[tuple[int, str]]:
    """(step, path) of every finished checkpoint name, newest first (by term, then step)."""
    return [(step, path) for _, step, _, path in _ranked(directory)]


def newest_epoch(directory: str) -> int:
    """Epochs done by the newest checkpoint, from its name alone (0: none)."""
    found = _ranked(directory)
    return found[0][2] if found else 0


def save(directory: str, payload: dict, keep: int, claim: fence.Claim | None = None) -> str:
    """Write one checkpoint; with `claim` (the writer's term), only while that term holds
    the fence: fence.Superseded otherwise, and nothing is committed."""
    os.makedirs(directory, exist_ok=True)
    buf = io.BytesIO()
    torch.save({"format": FORMAT, **payload}, buf)
    data = buf.getbuffer()
    digest = hashlib.sha256(data).hexdigest()[:16]
    term = claim.term if claim is not None else 0
    name = f"ckpt-e{payload['epoch']:05d}-s{payload['step']:010d}-t{term:08d}-{digest}.pt"
    final = os.path.join(directory, name)
    tmp = f"{final}.tmp.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if claim is not None:
            fence.check(directory, claim, f"checkpoint {name}")
        os.replace(tmp, final)
    finally:
        _remove(tmp)
    _fsync_dir(directory)
    if claim is not None:
        try:  # a new term claimed between the check and the rename: take the file back
            fence.check(directory, claim, f"checkpoint {name}")
        except fence.Superseded:
            _remove(final)
            raise
    prune(directory, keep, final)
    return final


def prune(directory: str, keep: int, current: str) -> None:
    for _, path in candidates(directory)[max(1, keep) :]:
        if path != current:
            _remove(path)
    # Temporary files of writers that died mid-write (or of one the job moved on without:
    # only the fence's holder gets this far); only a global rank 0 ever writes here.
    for name in os.listdir(directory):
        if ".pt.tmp." in name and not name.endswith(f".{os.getpid()}"):
            _remove(os.path.join(directory, name))


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


def read(path: str) -> dict:
    """Load one checkpoint, or raise ValueError if it is not complete and intact."""
    m = _NAME.match(os.path.basename(path))
    if m is None:
        raise ValueError("not a checkpoint file name")
    with open(path, "rb") as f:
        data = f.read()
    if hashlib.sha256(data).hexdigest()[:16] != m.group(4):
        raise ValueError(f"content does not match its digest ({len(data)} bytes): partial or corrupt")
    try:
        # weights_only: a checkpoint directory is shared storage; never run pickled code.
        payload = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    # torch.load fails as the bytes make it (UnpicklingError, RuntimeError, EOFError,
    # zipfile's errors...): each means this is no checkpoint to resume from.
    except Exception as e:  # noqa: BLE001 - any failure to load is the file's, said as ValueError
        raise ValueError(f"torch.load failed: {e}") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError("not a ddpjob checkpoint of a known format")
    return payload


def newest(directory: str) -> tuple[str, dict] | None:
    """The newest complete checkpoint, skipping (with a warning) corrupt ones; None when
    there is none at all. Checkpoints that are all unreadable are an error: starting
    from scratch over them would silently throw the training away."""
    found = candidates(directory)
    for _, path in found:
        try:
            return path, read(path)
        except (OSError, ValueError) as e:
            log(f"warning: skipping checkpoint {path}: {e}")
    if found:
        raise UsageError(
            f"none of the {len(found)} checkpoint(s) in {directory} is readable; move them away to start from scratch"
        )
    return None


def check_compatible(path: str, payload: dict, model_name: str, model: torch.nn.Module) -> None:
    theirs = payload.get("model_name")
    if theirs != model_name:
        raise UsageError(
            f"checkpoint {path} was written for model {theirs!r}, not {model_name!r}; "
            "use another --checkpoint-dir or the same --model"
        )
    mine = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    saved = {k: tuple(v.shape) for k, v in payload["model"].items()}
    if mine != saved:
        diff = sorted(set(mine.items()) ^ set(saved.items()))[:3]
        raise UsageError(f"checkpoint {path} does not fit this model (e.g. {diff}); different data or classes?")
