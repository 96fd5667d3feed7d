"""Datasets and sharded batching.

Small datasets (synthetic, MNIST, CIFAR-10) are decoded once into one tensor, moved to
the device once, and batched by indexing: no per-sample PIL decode, ToTensor and
collate, which is where the tutorial loop spends most of its time. Large ones
(ImageFolder) go through DataLoader workers (loader.py).
Either way a rigid job's ranks draw their shards from a DistributedSampler re-seeded by
`set_epoch`, so ranks see disjoint samples and the same number of steps; an elastic
job's ranks take their shares of global micro-batches (elastic_data.py), on both paths.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch.utils.data import DistributedSampler, TensorDataset

from . import UsageError
from .distributed import Dist, any_rank
from .elastic_data import ElasticBatches, global_batch
from .loader import LoaderBatches

KINDS = ("synthetic", "mnist", "cifar10", "imagefolder")
MNIST_NORM = ((0.1307,), (0.3081,))
CIFAR_NORM = ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))
IMAGENET_NORM = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
# A split held in memory: (samples, labels).
Split = tuple[torch.Tensor, torch.Tensor]


def parse_spec(spec: str) -> tuple[str, str | None]:
    kind, _sep, path = spec.partition(":")
    if kind not in KINDS:
        raise UsageError(f"unknown dataset {spec!r}: use synthetic, mnist:DIR, cifar10:DIR or imagefolder:DIR")
    if kind == "synthetic":
        return kind, None
    if not path:
        raise UsageError(f"--data {kind} needs a directory: {kind}:DIR")
    return kind, path


def _directory(kind: str, path: str | None) -> str:
    """The directory of a kind that reads one (parse_spec refuses such a kind without it)."""
    if path is None:
        raise UsageError(f"--data {kind} needs a directory: {kind}:DIR")
    return path


def synthetic(size: int, noise_seed: int, num_classes: int = 10, shape: tuple[int, ...] = (1, 28, 28)) -> Split:
    """MNIST-shaped, learnable: each class is a fixed random template (the same for the
    train and eval splits), each sample its template plus noise, so a model can (and
    must) learn the templates. Fixed seeds, not --seed: the data set never changes."""
    templates = torch.randn(num_classes, *shape, generator=torch.Generator().manual_seed(1234))
    g = torch.Generator().manual_seed(noise_seed)
    y = torch.randint(0, num_classes, (size,), generator=g)
    x = 0.15 * templates[y] + torch.randn(size, *shape, generator=g)
    return x, y


def _normalize(x: torch.Tensor, norm) -> torch.Tensor:
    mean = torch.tensor(norm[0]).view(1, -1, 1, 1)
    std = torch.tensor(norm[1]).view(1, -1, 1, 1)
    return (x.float().div_(255) - mean) / std


def _mnist_raw_dir(root: str) -> str | None:
    for d in (os.path.join(root, "MNIST", "raw"), os.path.join(root, "raw"), root):
        if os.path.isfile(os.path.join(d, "train-images-idx3-ubyte")):
            return d
    return None


def mnist(root: str, download: bool, d: Dist) -> tuple[Split, Split | None]:
    from torchvision.datasets import MNIST
    from torchvision.datasets.mnist import read_image_file, read_label_file

    raw = _mnist_raw_dir(root)
    if raw is None and download:
        if d.env.local_rank == 0:  # one download per node, the others wait
            MNIST(root, train=True, download=True)
            MNIST(root, train=False, download=True)
        any_rank(d, False)
        raw = _mnist_raw_dir(root)
    if raw is None:
        raise UsageError(
            f"no MNIST files under {root} (expected {root}/MNIST/raw/train-images-idx3-ubyte; --download fetches them)"
        )

    def read(prefix: str) -> Split | None:
        images = os.path.join(raw, f"{prefix}-images-idx3-ubyte")
        labels = os.path.join(raw, f"{prefix}-labels-idx1-ubyte")
        if not (os.path.isfile(images) and os.path.isfile(labels)):
            return None
        try:
            return _normalize(read_image_file(images).unsqueeze(1), MNIST_NORM), read_label_file(labels).long()
        except Exception as e:  # noqa: BLE001 - torchvision's reader fails as a bad file makes it: a usage error
            raise UsageError(f"cannot read MNIST file under {raw}: {e}") from None

    train = read("train")
    if train is None:
        raise UsageError(f"MNIST labels {raw}/train-labels-idx1-ubyte are missing")
    return train, read("t10k")


def cifar10(root: str, download: bool, d: Dist) -> tuple[Split, Split]:
    from torchvision.datasets import CIFAR10

    def read(train: bool) -> Split:
        try:
            ds = CIFAR10(root, train=train, download=download and d.env.local_rank == 0)
        except RuntimeError as e:
            raise UsageError(f"cifar10:{root}: {e}") from None
        x = torch.from_numpy(ds.data).permute(0, 3, 1, 2).contiguous()
        return _normalize(x, CIFAR_NORM), torch.tensor(ds.targets, dtype=torch.long)

    if download:
        any_rank(d, False)
    return read(True), read(False)


class TensorBatches:
    """One rank's batches from in-memory tensors: DistributedSampler indices, then
    index_select on the device. `shard_eval` gives every sample exactly once across
    ranks (no padding), for exact all-reduced evaluation."""

    def __init__(self, x, y, batch_size: int, d: Dist, seed: int, train: bool, channels_last: bool):
        self.x, self.y = x.to(d.device), y.to(d.device)
        self.batch_size, self.train, self.channels_last = batch_size, train, channels_last
        if train:
            # Indices over the samples (the sampler reads only the data set's length).
            self.sampler: DistributedSampler[int] = DistributedSampler(
                TensorDataset(self.y), num_replicas=d.world_size, rank=d.rank, shuffle=True, seed=seed
            )
            self.count = len(self.sampler)
        else:
            self.reshard(d.world_size, d.rank)

    def reshard(self, world: int, rank: int) -> None:
        """The evaluation shard of `rank` in a group of `world` (one that resized in place)."""
        if not self.train:
            self.shard = torch.arange(rank, len(self.y), world, device=self.y.device)
            self.count = len(self.shard)

    def __len__(self) -> int:
        return (self.count + self.batch_size - 1) // self.batch_size

    def epoch(self, epoch: int, start_batch: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        if self.train:
            self.sampler.set_epoch(epoch)
            order = torch.tensor(list(self.sampler), dtype=torch.long).to(self.x.device)
        else:
            order = self.shard
        for start in range(start_batch * self.batch_size, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            self.last_indices = idx  # for --sample-log
            xb = self.x.index_select(0, idx)
            if self.channels_last and xb.dim() == 4:
                xb = xb.contiguous(memory_format=torch.channels_last)
            yield xb, self.y.index_select(0, idx)


def imagefolder(root: str, image_size: int, decode: str = "cpu"):
    """(train, evaluation): decoded by the DataLoader's workers, or for `--decode gpu` left
    encoded (gpu_decode.py), decoded on the device by the training process."""
    from torchvision import datasets
    from torchvision.transforms import v2

    split_train = os.path.join(root, "train")
    train_dir = split_train if os.path.isdir(split_train) else root
    eval_dir = next((os.path.join(root, s) for s in ("val", "test") if os.path.isdir(os.path.join(root, s))), None)
    tail = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(*IMAGENET_NORM)]
    train_tf = v2.Compose([v2.RandomResizedCrop(image_size, antialias=True), v2.RandomHorizontalFlip(), *tail])
    eval_tf = v2.Compose([v2.Resize(int(image_size * 256 / 224), antialias=True), v2.CenterCrop(image_size), *tail])
    try:
        train = datasets.ImageFolder(train_dir, transform=train_tf)
        evaluation = datasets.ImageFolder(eval_dir, transform=eval_tf) if eval_dir else None
    except (FileNotFoundError, OSError) as e:
        raise UsageError(f"imagefolder:{root}: {e}") from None
    if evaluation is not None and evaluation.classes != train.classes:
        raise UsageError(f"imagefolder:{root}: {eval_dir} has classes {evaluation.classes}, train has {train.classes}")
    if decode == "gpu":
        from .gpu_decode import EncodedImages

        encoded = EncodedImages(train.samples, image_size, True)
        encoded.classes = train.classes
        return encoded, EncodedImages(evaluation.samples, image_size, False) if evaluation else None
    return train, evaluation


def _elastic_global(args, d: Dist) -> int | None:
    """An elastic job's global micro-batch G (elastic_data.py); None for a rigid job."""
    if not d.env.elastic_max_nodes:
        return None
    return global_batch(args.batch_size, d.env.local_world_size, d.env.elastic_max_nodes, args.global_batch_size)


@dataclass
class Data:
    train: TensorBatches | LoaderBatches | ElasticBatches
    eval: TensorBatches | LoaderBatches | None
    input_shape: tuple[int, ...]
    num_classes: int


def load_data(args, d: Dist) -> Data:
    kind, path = parse_spec(args.data)
    if path is not None and not os.path.isdir(path) and not args.download:
        raise UsageError(f"data directory {path} does not exist")
    cl, decode = args.channels_last, getattr(args, "decode", "cpu")
    if decode == "gpu" and kind != "imagefolder":
        raise UsageError(f"--decode gpu decodes the JPEGs of --data imagefolder:DIR, not {kind} data")
    if kind == "imagefolder":
        images, image_eval = imagefolder(_directory(kind, path), args.image_size, decode)

        def loader(ds, is_train: bool) -> LoaderBatches:
            return LoaderBatches(
                ds,
                args.batch_size,
                d,
                args.seed,
                is_train,
                args.workers,
                cl,
                _elastic_global(args, d) if is_train else None,
                args.image_size if decode == "gpu" else None,
            )

        return Data(
            loader(images, True),
            loader(image_eval, False) if image_eval else None,
            (3, args.image_size, args.image_size),
            len(images.classes),
        )
    evaluation: Split | None  # MNIST's test files may be absent
    if kind == "synthetic":
        train, evaluation = synthetic(args.synthetic_size, 1), synthetic(max(1, args.synthetic_size // 4), 2)
    elif kind == "mnist":
        train, evaluation = mnist(_directory(kind, path), args.download, d)
    else:
        train, evaluation = cifar10(_directory(kind, path), args.download, d)

    def mk(xy: Split, is_train: bool) -> TensorBatches:
        return TensorBatches(*xy, args.batch_size, d, args.seed, is_train, cl)

    global_size = _elastic_global(args, d)
    if global_size is not None:  # elastic: exactly once per epoch at any world size (elastic_data.py)
        return Data(
            ElasticBatches(*train, global_size, d, args.seed, cl),
            mk(evaluation, False) if evaluation else None,
            tuple(train[0].shape[1:]),
            10,
        )
    return Data(mk(train, True), mk(evaluation, False) if evaluation else None, tuple(train[0].shape[1:]), 10)
