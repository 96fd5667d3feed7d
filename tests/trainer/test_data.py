import argparse

import pytest
import torch

from ddpjob_trainer import UsageError
from ddpjob_trainer.data import TensorBatches, load_data, parse_spec, synthetic
from ddpjob_trainer.distributed import Dist
from ddpjob_trainer.env import ProcessEnv
from tests.trainer.trainer_helpers import write_imagefolder, write_mnist


def rank(r=0, world=1):
    return Dist(ProcessEnv(r, r, world, world, 0, None, None, None), torch.device("cpu"), None)


def args(data, **kw):
    base = dict(
        data=data,
        batch_size=16,
        seed=0,
        channels_last=False,
        download=False,
        synthetic_size=256,
        image_size=16,
        workers=0,
    )
    return argparse.Namespace(**{**base, **kw})


def test_synthetic_is_deterministic_and_labelled_by_template():
    x1, y1 = synthetic(64, 1)
    x2, y2 = synthetic(64, 1)
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert x1.shape == (64, 1, 28, 28) and set(y1.tolist()) <= set(range(10))
    # Learnable: the nearest class mean (computed on a train split) predicts held-out labels.
    xt, yt = synthetic(2000, 1)
    means = torch.stack([xt[yt == c].mean(0) for c in range(10)]).flatten(1)
    xe, ye = synthetic(200, 2)
    pred = torch.cdist(xe.flatten(1), means).argmin(1)
    assert (pred == ye).float().mean() > 0.9


def test_train_shards_are_disjoint_cover_and_reshuffled_each_epoch():
    x = torch.arange(100).float().view(100, 1)
    y = torch.zeros(100, dtype=torch.long)
    shards = [TensorBatches(x, y, 8, rank(r, 2), 0, True, False) for r in range(2)]
    assert len(shards[0]) == len(shards[1]) == 7  # same number of steps on every rank
    seen = [torch.cat([b[0] for b in s.epoch(1)]).flatten().tolist() for s in shards]
    assert set(seen[0]).isdisjoint(seen[1]) and set(seen[0]) | set(seen[1]) == set(range(100))
    again = torch.cat([b[0] for b in shards[0].epoch(2)]).flatten().tolist()
    assert again != seen[0]  # set_epoch changed the order
    # Starting mid-epoch (after a preemption) continues the same order.
    tail = torch.cat([b[0] for b in shards[0].epoch(1, start_batch=3)]).flatten().tolist()
    assert tail == seen[0][24:]


def test_eval_shards_count_every_sample_once():
    x = torch.arange(10).float().view(10, 1)
    y = torch.zeros(10, dtype=torch.long)
    seen = [torch.cat([b[0] for b in TensorBatches(x, y, 4, rank(r, 3), 0, False, False).epoch(0)]) for r in range(3)]
    assert sorted(torch.cat(seen).flatten().tolist()) == list(range(10))


def test_mnist_reader_on_idx_files(tmp_path):
    write_mnist(tmp_path, n_train=64, n_test=32)
    data = load_data(args(f"mnist:{tmp_path}"), rank())
    assert data.input_shape == (1, 28, 28) and data.num_classes == 10
    x, y = next(data.train.epoch(1))
    assert x.shape == (16, 1, 28, 28) and x.dtype == torch.float32 and y.dtype == torch.long
    assert -1 < x.min() < 0 and x.max() > 2  # MNIST normalisation
    assert sum(len(b[1]) for b in data.eval.epoch(0)) == 32
    # Also accepted: DIR pointing at the raw folder itself.
    assert load_data(args(f"mnist:{tmp_path}/MNIST/raw"), rank()).input_shape == (1, 28, 28)


def test_imagefolder_reader(tmp_path):
    write_imagefolder(tmp_path)
    data = load_data(args(f"imagefolder:{tmp_path}"), rank())
    assert data.num_classes == 3 and data.input_shape == (3, 16, 16)
    x, y = next(data.train.epoch(1))
    assert x.shape == (16, 3, 16, 16) and set(y.tolist()) <= {0, 1, 2}
    assert sum(len(b[1]) for b in data.eval.epoch(0)) == 18


@pytest.mark.parametrize(
    "spec,needle",
    [
        ("mnist:/nonexistent/dir", "data directory /nonexistent/dir does not exist"),
        ("imagenet:/x", "unknown dataset"),
        ("mnist", "needs a directory"),
    ],
)
def test_bad_data_specs(spec, needle):
    with pytest.raises(UsageError, match=needle):
        load_data(args(spec), rank())


def test_empty_dirs_are_clear_errors(tmp_path):
    with pytest.raises(UsageError, match="no MNIST files"):
        load_data(args(f"mnist:{tmp_path}"), rank())
    with pytest.raises(UsageError, match="imagefolder"):
        load_data(args(f"imagefolder:{tmp_path}"), rank())
    assert parse_spec("synthetic") == ("synthetic", None)
