"""Exactly-once across a resize on the DataLoader path (`--data imagefolder`, loader.py):
in process, one rank at a time (no process group), with real image files and workers.
The whole-trainer proof, stopped at one world size and resumed at another, is
test_elastic_imagefolder.py."""

import argparse
from collections import Counter

import pytest
import torch

from ddpjob_trainer.data import load_data
from ddpjob_trainer.distributed import Dist
from ddpjob_trainer.env import ProcessEnv
from tests.trainer.trainer_helpers import write_imagefolder

PER_CLASS = 12  # 3 classes: 36 training images


def rank(r, world, max_nodes):
    return Dist(ProcessEnv(r, 0, world, 1, 0, None, None, None, max_nodes), torch.device("cpu"), None)


def loaders(root, world, max_nodes=4, workers=0, **kw):
    base = dict(
        data=f"imagefolder:{root}",
        batch_size=4,
        seed=3,
        channels_last=False,
        download=False,
        image_size=8,
        workers=workers,
        global_batch_size=None,
    )
    args = argparse.Namespace(**{**base, **kw})
    return [load_data(args, rank(r, world, max_nodes)).train for r in range(world)]


def consume(batches, epoch, start, stop):
    """Samples of micro-batches [start, stop) of `epoch` over all ranks; each rank's loaded
    batch matches the indices it says it trained on."""
    seen = []
    for b in batches:
        for k, (x, y) in enumerate(b.epoch(epoch, start), start=start):
            if k == stop:
                break
            assert len(x) == len(y) == len(b.last_indices)
            assert b.last_total == sum(len(other_share(o, epoch, k)) for o in batches)
            seen += [int(i) for i in b.last_indices]
    return seen


def other_share(b, epoch, k):
    from ddpjob_trainer.elastic_data import epoch_order, micro_batch

    order = epoch_order(len(b.loader.dataset), b.elastic.seed, epoch)
    return micro_batch(order, k, b.global_size, b.elastic.world, b.elastic.rank)[0]


@pytest.mark.parametrize("workers", [0, 1])
def test_a_resize_mid_epoch_on_the_loader_path_neither_loses_nor_repeats(tmp_path, workers):
    write_imagefolder(tmp_path, per_class=PER_CLASS)
    four, three = loaders(tmp_path, 4, workers=workers), loaders(tmp_path, 3, workers=workers)
    assert four[0].global_size == 16 and len(four[0]) == len(three[0]) == 3  # 16 + 16 + 4
    # Epoch 1: 4 ranks for one micro-batch, then 3 (a node lost) from the checkpoint on.
    seen = consume(four, 1, 0, 1) + consume(three, 1, 1, 3)
    assert Counter(seen) == Counter(range(3 * PER_CLASS))
    # The label each rank got is its file's class: the loader loaded the samples it names.
    b = three[1]
    for _x, y in b.epoch(2):
        assert y.tolist() == [b.loader.dataset.targets[i] for i in b.last_indices.tolist()]


def test_the_rigid_sharding_would_repeat_and_lose_samples(tmp_path):
    """The audit above can fail: DistributedSampler's shards (a rigid job's, and this path's
    before elastic jobs took their shares) resumed at the same offset at another size."""
    write_imagefolder(tmp_path, per_class=PER_CLASS)
    four, three = loaders(tmp_path, 4, max_nodes=None), loaders(tmp_path, 3, max_nodes=None)
    seen = []
    for batches, start, stop in ((four, 0, 2), (three, 2, None)):
        for b in batches:
            for j, _ in enumerate(b.epoch(1, start), start=start):
                if j == stop:
                    break
                seen += [int(i) for i in b.last_indices]
    counts = Counter(seen)  # 2 x 4 x 4 at 4 ranks (of 9 each), then 3 x 4 at 3 (of 12 each): 44
    assert sum(c - 1 for c in counts.values()) >= 44 - 3 * PER_CLASS


def test_a_rank_with_no_share_of_the_last_micro_batch_still_takes_the_step(tmp_path):
    write_imagefolder(tmp_path, per_class=PER_CLASS)
    # 36 samples in micro-batches of 17: the last one has 2, for 3 ranks.
    batches = loaders(tmp_path, 3, global_batch_size=17)
    shapes = [[tuple(x.shape) for x, _ in b.epoch(1, 2)] for b in batches]
    assert shapes == [[(1, 3, 8, 8)], [(1, 3, 8, 8)], [(0, 3, 8, 8)]]
    assert [b.last_total for b in batches] == [2, 2, 2]


def test_unset_workers_default_to_a_few_per_process(tmp_path):
    write_imagefolder(tmp_path, per_class=2)
    (b,) = loaders(tmp_path, 1, workers=None)
    assert 1 <= b.loader.num_workers <= 4 and b.loader.persistent_workers
