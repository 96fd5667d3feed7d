"""What a checkpoint holds and how every rank gets it back: model, optimizer, scaler,
position (epoch, batch, step) and every rank's RNG state, so a resumed run continues
bit for bit where the interrupted one was."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch

from . import UsageError, checkpoint, fence
from .distributed import Dist, any_rank, broadcast_object, gather_objects


@dataclass
class Position:
    epoch: int = 0  # epochs completed
    batch: int = 0  # micro-batches already done in epoch + 1 (non-zero after a preemption)
    step: int = 0  # optimizer steps done in total


def resumed(pos: Position, epochs: int, path: str, directory: str) -> str:
    """What a resume says: where it goes on, or, for a checkpoint of the last epoch (a rerun
    of a finished job), that nothing is left to train and how to start over."""
    if pos.epoch < epochs:
        return f"resumed from {path}: {pos.epoch} epoch(s) done, continuing at epoch {pos.epoch + 1}"
    return (
        f"resumed from {path}: training is complete ({pos.epoch} of {epochs} epoch(s) done), nothing is left "
        f"to train; to start over, delete the checkpoints in {directory} (`ddpjob run --fresh` does), "
        "or raise --epochs to train on"
    )


def seed_everything(seed: int, rank: int) -> None:
    # Each rank its own stream (dropout, augmentation); the same seed gives the same run.
    random.seed(seed + rank)
    torch.manual_seed(seed + rank)


def rng_state(device: torch.device) -> dict:
    return {
        "python": random.getstate(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
    }


def set_rng_state(state: dict, device: torch.device) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if device.type == "cuda" and state.get("cuda") is not None:
        torch.cuda.set_rng_state(state["cuda"], device)


def save(
    d: Dist,
    directory: str,
    keep: int,
    pos: Position,
    model,
    optimizer,
    scaler,
    args,
    summary: dict,
    claim: fence.Claim | None = None,
    writing: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext,
) -> str | None:
    """Collective (RNG gather, then the verdict); rank 0 writes, inside `writing()` (the
    stop's clock leaves the write's time out: stop.py). Returns the path on rank 0.
    fence.Superseded on every rank when the fence refused rank 0's commit (`claim`: the
    group's term): they all end together, none waits in a collective for a rank gone."""
    rngs = gather_objects(d, rng_state(d.device))
    path, refused = None, None
    if d.is_main:
        try:
            with writing():
                path = _write(d.world_size, directory, keep, pos, model, optimizer, scaler, args, summary, rngs, claim)
        except fence.Superseded as e:
            refused = e
    if claim is not None and any_rank(d, refused is not None):
        raise refused or fence.Superseded("global rank 0's checkpoint was refused: the job moved on without this group")
    return path


def _write(
    world_size: int, directory: str, keep: int, pos: Position, model, optimizer, scaler, args, summary, rngs, claim
):
    return checkpoint.save(
        directory,
        {
            "model_name": args.model,
            "data": args.data,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scaler": scaler.state_dict(),
            "epoch": pos.epoch,
            "batch": pos.batch,
            "step": pos.step,
            "world_size": world_size,
            "batch_size": args.batch_size,
            "global_batch": getattr(args, "elastic_global_batch", None),
            "rng": rngs,
            "summary": summary,  # so a run resumed after its last epoch can still report it
        },
        keep,
        claim,
    )


def restore(d: Dist, directory: str, model, optimizer, scaler, args) -> tuple[Position, str, dict] | None:
    """Rank 0 picks the newest complete checkpoint; every rank loads that same file and
    they agree it worked before anyone trains (a volume not shared by all nodes would
    otherwise give ranks different starting points)."""
    chosen, problem, found = None, None, None
    if d.is_main:
        try:
            found = checkpoint.newest(directory)
            chosen = found[0] if found else None
        except UsageError as e:
            problem = str(e)
    # Every rank learns the outcome, errors included: a rank that raised alone would
    # leave the others waiting in the next collective.
    chosen, problem = broadcast_object(d, (chosen, problem))
    if problem:
        raise UsageError(problem)
    if chosen is None:
        return None
    error = None
    try:
        payload = found[1] if d.is_main and found is not None else checkpoint.read(chosen)
        checkpoint.check_compatible(chosen, payload, args.model, model)
    except (OSError, ValueError) as e:
        error = UsageError(
            f"rank {d.rank} cannot read checkpoint {chosen} ({e}): is the checkpoint volume shared by all nodes?"
        )
    except UsageError as e:
        error = e
    if any_rank(d, error is not None):
        raise error or UsageError(f"another rank could not load checkpoint {chosen}")
    model.load_state_dict(payload["model"])
    optimizer.load_state_dict(payload["optimizer"])
    scaler.load_state_dict(payload["scaler"])
    pos = Position(payload["epoch"], payload["batch"], payload["step"])
    same_layout = payload["world_size"] == d.world_size and payload["batch_size"] == args.batch_size
    global_batch = getattr(args, "elastic_global_batch", None)
    if same_layout:
        set_rng_state(payload["rng"][d.rank], d.device)
    elif pos.batch and global_batch and payload.get("global_batch") == global_batch:
        pass  # an elastic position is a sample offset at any world size (elastic_data.py)
    elif pos.batch:
        # A mid-epoch position means nothing with another world or batch size: redo that epoch.
        pos.batch = 0
    return pos, chosen, dict(payload.get("summary") or {})
