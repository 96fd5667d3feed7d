"""Exactly-once sampling across a resize (an elastic job: NNODES=MIN:MAX).

A rigid job shards each epoch with DistributedSampler, whose shards depend on the world
size: resumed mid-epoch at another size, it would skip some samples and repeat others.
Here the epoch's order is one global permutation (seeded by --seed and the epoch, the
same whatever the world), consumed in global micro-batches of a fixed size G; micro-batch
k of the epoch is always samples [k*G, (k+1)*G) of that order, and each rank takes its
part of it (the G samples split as evenly as the world allows). The checkpoint's position
(micro-batches done in the epoch) is therefore a sample offset that means the same at any
world size: a group that resumes at 3 nodes where one of 4 left off continues with the
very next sample. No padding: the epoch's last micro-batch is what is left.

The rule for the global batch and the learning rate: G = --batch-size x processes per node
x maxNodes (the global batch at full size, --batch-size per process there) and stays so
at every size; a smaller group gives each process a larger share, and the loss is the
mean over the G samples (each rank's summed loss x world / G, which DDP's gradient
average turns into that mean). So the optimizer sees the same batch whatever the size,
and the learning rate needs no change. `--global-batch-size` sets G instead.

Both data paths follow this order: in-memory tensors (`ElasticBatches`) and files decoded
by DataLoader workers (`RankMicroBatches`, the batch sampler of data.py's LoaderBatches).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from .distributed import Dist


def global_batch(batch_size: int, nproc_per_node: int, max_nodes: int, explicit: int | None = None) -> int:
    return explicit or batch_size * nproc_per_node * max_nodes


def epoch_order(size: int, seed: int, epoch: int) -> torch.Tensor:
    """The epoch's sample order: the same on every rank and at every world size."""
    return torch.randperm(size, generator=torch.Generator().manual_seed(seed * 1_000_003 + epoch))


def share(count: int, world: int, rank: int) -> tuple[int, int]:
    """(start, end) of `rank`'s part of `count` consecutive samples: the first count % world
    ranks take one more."""
    base, extra = divmod(count, world)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


def micro_batch(order: torch.Tensor, k: int, global_size: int, world: int, rank: int) -> tuple[torch.Tensor, int]:
    """This rank's indices of micro-batch `k`, and the micro-batch's size over all ranks."""
    chunk = order[k * global_size : (k + 1) * global_size]
    start, end = share(len(chunk), world, rank)
    return chunk[start:end], len(chunk)


class ElasticBatches:
    """One rank's batches of an elastic job from in-memory tensors. After each yield,
    `last_total` is the micro-batch's size over all ranks and `last_indices` this rank's
    samples (for the loss scale and the sample log)."""

    def __init__(self, x, y, global_size: int, d: Dist, seed: int, channels_last: bool):
        self.x, self.y = x.to(d.device), y.to(d.device)
        self.global_size, self.seed, self.channels_last = global_size, seed, channels_last
        self.world, self.rank = d.world_size, d.rank
        self.last_total, self.last_indices = 0, torch.empty(0, dtype=torch.long)

    def __len__(self) -> int:
        return (len(self.y) + self.global_size - 1) // self.global_size

    def reshard(self, world: int, rank: int) -> None:
        """A group that resized in place: the next micro-batch is split over the new group."""
        self.world, self.rank = world, rank

    def epoch(self, epoch: int, start_batch: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        order = epoch_order(len(self.y), self.seed, epoch)
        for k in range(start_batch, len(self)):
            idx, self.last_total = micro_batch(order, k, self.global_size, self.world, self.rank)
            self.last_indices = idx
            idx = idx.to(self.x.device)
            xb = self.x.index_select(0, idx)
            if self.channels_last and xb.dim() == 4:
                xb = xb.contiguous(memory_format=torch.channels_last)
            yield xb, self.y.index_select(0, idx)


class RankMicroBatches(torch.utils.data.Sampler):
    """A DataLoader batch sampler: this rank's share of each global micro-batch of the
    epoch, from the checkpoint's micro-batch on. The loader's workers (and prefetch) run
    ahead of training, so `shares()` tells the training loop, in the same order, which
    micro-batch each loaded batch is; an empty share (fewer samples left than ranks) is
    not sent to the loader, whose collate cannot build an empty batch."""

    def __init__(self, size: int, global_size: int, world: int, rank: int, seed: int):
        self.size, self.global_size, self.world, self.rank, self.seed = size, global_size, world, rank, seed
        self.set_epoch(1)

    def reshard(self, world: int, rank: int) -> None:
        self.world, self.rank = world, rank

    def set_epoch(self, epoch: int, start: int = 0) -> None:
        self.order, self.start = epoch_order(self.size, self.seed, epoch), start

    def micro_batches(self) -> int:
        return (self.size + self.global_size - 1) // self.global_size

    def shares(self) -> Iterator[tuple[torch.Tensor, int]]:
        for k in range(self.start, self.micro_batches()):
            yield micro_batch(self.order, k, self.global_size, self.world, self.rank)

    def __iter__(self) -> Iterator[list[int]]:
        return (idx.tolist() for idx, _ in self.shares() if len(idx))

    def __len__(self) -> int:
        return sum(1 for idx, _ in self.shares() if len(idx))
