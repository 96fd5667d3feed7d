"""Batches decoded from files (ImageFolder) by DataLoader workers, with pinned memory,
persistent workers and prefetch, for data sets too large to hold as one tensor (data.py
holds the small ones). A rigid job shards each epoch with DistributedSampler; an elastic
job takes its share of each global micro-batch (elastic_data.py), as the tensor path does."""

from __future__ import annotations

import os
import signal

import torch
from torch.utils.data import DataLoader, DistributedSampler, Subset

from . import gpu_decode
from .distributed import Dist
from .elastic_data import RankMicroBatches

DEFAULT_WORKERS = 4


def _ignore_stop_signals(_worker_id: int) -> None:
    """A stop (SIGTERM/SIGINT) is the training process's to handle: it finishes its step,
    saves and shuts its workers down. torchrun signals the trainer's whole process group,
    workers included, and torch's worker handler dies of it, which would fail the step
    before the checkpoint (seen with a preempted imagefolder job)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.set_wakeup_fd(-1)  # the trainer's (stop.py), inherited by the fork: not this process's to write


class _SkippingSampler(torch.utils.data.Sampler):
    """DistributedSampler that can start mid-epoch (resuming after a preemption)."""

    def __init__(self, inner: DistributedSampler):
        self.inner, self.skip = inner, 0
        self.order: list[int] = []

    def set_epoch(self, epoch: int, skip: int = 0) -> None:
        self.inner.set_epoch(epoch)
        self.skip, self.order = skip, list(self.inner)

    def __iter__(self):
        return iter(self.order[self.skip :])

    def __len__(self) -> int:
        return len(self.inner) - self.skip


class LoaderBatches:
    """One rank's batches decoded by DataLoader workers. A rigid job shards with
    DistributedSampler; an elastic one (`global_size` set) takes its share of each global
    micro-batch (elastic_data.py), so a resume at another world size loses and repeats
    nothing. After each yield `last_indices` are the batch's samples (for --sample-log)
    and, when elastic, `last_total` the micro-batch's size over all ranks (for the loss)."""

    # Set only once a batch is yielded (the trainer reads them with getattr and a default).
    last_indices: list[int] | torch.Tensor
    last_total: int

    def __init__(
        self,
        dataset,
        batch_size: int,
        d: Dist,
        seed: int,
        train: bool,
        workers: int | None,
        channels_last: bool,
        global_size: int | None = None,
        decode_size: int | None = None,
    ):
        """`decode_size`: the samples are encoded JPEGs (gpu_decode.py), decoded here to that size."""
        self.device, self.batch_size, self.channels_last = d.device, batch_size, channels_last
        self.decode_size = decode_size
        if workers is None:  # --workers unset: a few per process, within the node's CPUs
            workers = max(1, min(DEFAULT_WORKERS, (os.cpu_count() or 1) // max(1, d.env.local_world_size)))
        # One of three: an elastic job's share of each micro-batch, a rigid job's shard,
        # or (evaluation) this rank's subset.
        self.sampler: _SkippingSampler | None = None
        self.elastic: RankMicroBatches | None = None
        self.subset: Subset | None = None
        if train and global_size:
            self.elastic = RankMicroBatches(len(dataset), global_size, d.world_size, d.rank, seed)
            self.global_size, self.last_total = global_size, 0
            self.sample_shape: tuple[int, ...] | torch.Size | None = (
                (3, decode_size, decode_size) if decode_size else None
            )
        elif train:
            self.sampler = _SkippingSampler(DistributedSampler(dataset, d.world_size, d.rank, shuffle=True, seed=seed))
        else:
            self.full_size = len(dataset)
            dataset = self.subset = Subset(dataset, range(d.rank, len(dataset), d.world_size))
        self.count = len(self.sampler.inner) if self.sampler is not None else len(dataset)
        self.loader = DataLoader(
            dataset,
            batch_size=batch_size if self.elastic is None else 1,  # a batch sampler makes the batches
            sampler=self.sampler,
            batch_sampler=self.elastic,
            num_workers=workers,
            collate_fn=gpu_decode.collate if decode_size else None,  # None: torch's default_collate
            worker_init_fn=_ignore_stop_signals if workers else None,
            pin_memory=d.device.type == "cuda",  # page-locked buffers: async host-to-GPU copies
            persistent_workers=workers > 0,  # no worker re-spawn (and re-import) every epoch
            prefetch_factor=4 if workers > 0 else None,
        )

    def reshard(self, world: int, rank: int) -> None:
        """A group that resized in place: this rank's share from the next micro-batch on
        (training), or its evaluation subset. Only an elastic job's loaders resize."""
        if self.elastic is not None:
            self.elastic.reshard(world, rank)
        elif self.subset is not None:
            self.subset.indices = range(rank, self.full_size, world)
            self.count = len(self.subset)

    def __len__(self) -> int:
        if self.elastic is not None:
            return self.elastic.micro_batches()
        return (self.count + self.batch_size - 1) // self.batch_size

    def _move(self, xb, yb):
        if self.decode_size:  # (bytes, crops): decoded on the device itself
            xb = gpu_decode.decode(*xb, self.decode_size, self.device)
        return self._placed(xb, yb)

    def _placed(self, xb, yb):
        xb = xb.to(self.device, non_blocking=True)
        if self.channels_last:
            xb = xb.contiguous(memory_format=torch.channels_last)
        return xb, yb.to(self.device, non_blocking=True)

    def epoch(self, epoch: int, start_batch: int = 0):
        if self.elastic is not None:
            yield from self._elastic_epoch(self.elastic, epoch, start_batch)
            return
        if self.sampler is not None:
            self.sampler.set_epoch(epoch, start_batch * self.batch_size)
        start = self.sampler.skip if self.sampler is not None else 0
        for j, (xb, yb) in enumerate(self.loader):
            if self.sampler is not None:
                self.last_indices = self.sampler.order[start + j * self.batch_size :][: len(yb)]
            yield self._move(xb, yb)

    def _elastic_epoch(self, elastic: RankMicroBatches, epoch: int, start_batch: int):
        elastic.set_epoch(epoch, start_batch)
        loaded = iter(self.loader)  # the non-empty shares, in the order of shares()
        for idx, total in elastic.shares():
            self.last_indices, self.last_total = idx, total
            if len(idx):
                xb, yb = self._move(*next(loaded))
                self.sample_shape = xb.shape[1:]
            else:  # nothing left for this rank in this micro-batch: it still joins the step
                shape = self.sample_shape or self.loader.dataset[0][0].shape
                xb, yb = self._placed(torch.empty(0, *shape), torch.empty(0, dtype=torch.long))
            yield xb, yb
