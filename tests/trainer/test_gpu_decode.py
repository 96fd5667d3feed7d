"""`--decode gpu` (gpu_decode.py): the workers read bytes and draw crops, the training
process decodes a whole batch at once on its device. Here the device is the CPU, which
runs the same code (torchvision's decode_jpeg on CPU instead of nvJPEG); the GPU tier
runs it with CUDA."""

from __future__ import annotations

import argparse
import math
import random
from collections import Counter
from typing import Any

import pytest
import torch
from PIL import Image

from ddpjob_trainer import UsageError, gpu_decode
from ddpjob_trainer.data import imagefolder, load_data
from ddpjob_trainer.distributed import Dist
from ddpjob_trainer.env import ProcessEnv
from ddpjob_trainer.loader import LoaderBatches
from tests.trainer.trainer_helpers import write_imagefolder

SIZE = 16


def one_rank(world: int = 1, rank: int = 0, max_nodes: int | None = None) -> Dist:
    return Dist(ProcessEnv(rank, 0, world, 1, 0, None, None, None, max_nodes), torch.device("cpu"), None)


def args(root, **kw) -> argparse.Namespace:
    base = dict(
        data=f"imagefolder:{root}",
        batch_size=4,
        seed=3,
        channels_last=False,
        download=False,
        image_size=SIZE,
        workers=0,
        global_batch_size=None,
        decode="gpu",
    )
    return argparse.Namespace(**{**base, **kw})


@pytest.mark.parametrize("width, height", [(400, 300), (300, 400), (64, 64), (1000, 10), (10, 1000)])
def test_random_crops_follow_random_resized_crops_bounds(width, height) -> None:
    rng = random.Random(0)
    for _ in range(200):
        top, left, h, w = gpu_decode.random_resized_crop(width, height, rng)
        assert top >= 0 and top + h <= height and left >= 0 and left + w <= width and h > 0 and w > 0
        if (width, height) in ((1000, 10), (10, 1000)):
            continue  # no crop of that scale fits: the central fallback, clamped to the ratio
        assert 0.08 * 0.9 <= h * w / (width * height) <= 1.0
        assert 3 / 4 * 0.9 <= w / h <= 4 / 3 * 1.1


def test_the_evaluation_crop_is_resize_then_center_crop_in_the_originals_pixels() -> None:
    # Resize(SIZE*256/224 = 18) makes 400x300 into 24x18; CenterCrop(16) keeps 16/18 of the
    # shorter side: 267 of the original's 300, centred.
    top, left, h, w = gpu_decode.center_crop(400, 300, SIZE)
    assert (h, w) == (267, 267) and (top, left) == ((300 - 267) // 2, (400 - 267) // 2)


def test_a_decoded_batch_matches_the_cpu_pipelines_evaluation_images(tmp_path) -> None:
    # Smooth images, so that two JPEG decoders and two resizers agree to within a few levels.
    root = tmp_path / "data"
    for split in ("train", "val"):
        for cls in ("a", "b"):
            (root / split / cls).mkdir(parents=True)
            for i in range(2):
                x = torch.linspace(0, 1, 120).view(1, 120).expand(90, 120)
                pixels = (torch.stack([x, x.flip(1), x * 0 + 0.3 + 0.2 * i]) * 255).byte().permute(1, 2, 0)
                Image.fromarray(pixels.numpy()).save(root / split / cls / f"{i}.jpg", quality=95)
    _, cpu_eval = imagefolder(str(root), SIZE, "cpu")
    _, gpu_eval = imagefolder(str(root), SIZE, "gpu")
    (data, lengths, crops), _labels = gpu_decode.collate([gpu_eval[i] for i in range(len(gpu_eval))])
    decoded = gpu_decode.decode(data, lengths, crops, SIZE, torch.device("cpu"))
    reference = torch.stack([cpu_eval[i][0] for i in range(len(cpu_eval))])
    assert decoded.shape == reference.shape == (4, 3, SIZE, SIZE)
    assert (decoded - reference).abs().mean() < 0.02, (decoded - reference).abs().mean()


def test_training_batches_are_decoded_with_their_labels_and_every_sample_once(tmp_path) -> None:
    root = write_imagefolder(tmp_path / "data", per_class=6, size=24, ext="jpg")
    batches = load_data(args(root), one_rank()).train
    assert isinstance(batches, LoaderBatches)
    dataset: Any = batches.loader.dataset  # torchvision's ImageFolder
    seen = []
    for x, y in batches.epoch(1):
        assert x.shape[1:] == (3, SIZE, SIZE) and x.dtype == torch.float32 and torch.isfinite(x).all()
        assert y.tolist() == [dataset.samples[int(i)][1] for i in batches.last_indices]
        # colour is the class: the decoded image's strongest channel says which
        classes = {"red": 0, "green": 1, "blue": 2}
        strongest = x.mean(dim=(2, 3)).argmax(1).tolist()
        names = [dataset.classes[label] for label in y.tolist()]
        assert strongest == [classes[n] for n in names], (strongest, names)
        seen += [int(i) for i in batches.last_indices]
    assert Counter(seen) == Counter(range(18))


@pytest.mark.parametrize("workers", [0, 1])
def test_an_elastic_job_decodes_its_share_of_each_global_micro_batch(tmp_path, workers) -> None:
    root = write_imagefolder(tmp_path / "data", per_class=6, size=24, ext="jpg")
    ranks = [load_data(args(root, workers=workers), one_rank(3, r, max_nodes=3)).train for r in range(3)]
    seen = []
    for b in ranks:
        for x, y in b.epoch(1):
            assert x.shape == (len(b.last_indices), 3, SIZE, SIZE) and len(y) == len(b.last_indices)
            seen += [int(i) for i in b.last_indices]
    assert Counter(seen) == Counter(range(18))


def test_a_png_in_the_folder_is_refused_naming_it(tmp_path) -> None:
    root = write_imagefolder(tmp_path / "data", per_class=2, ext="png")
    with pytest.raises(UsageError, match=r"--decode gpu decodes JPEG files only, and the data has 0\.png"):
        load_data(args(root), one_rank())


def test_other_data_with_decode_gpu_is_refused() -> None:
    with pytest.raises(UsageError, match="--decode gpu decodes the JPEGs of --data imagefolder:DIR, not synthetic"):
        load_data(args("x", data="synthetic", synthetic_size=8), one_rank())


def test_normalization_is_imagenets() -> None:
    white = torch.full((1, 3, 4, 4), 255, dtype=torch.uint8)
    data = torch.frombuffer(bytearray(_jpeg(white[0])), dtype=torch.uint8)
    out = gpu_decode.decode(data, torch.tensor([len(data)]), torch.tensor([[0, 0, 4, 4, 0]]), 4, torch.device("cpu"))
    expected = [(1 - m) / s for m, s in zip(gpu_decode.MEAN, gpu_decode.STD, strict=True)]
    assert all(math.isclose(out[0, c].mean().item(), expected[c], abs_tol=0.03) for c in range(3)), out[0].mean((1, 2))


def _jpeg(image: torch.Tensor) -> bytes:
    from torchvision.io import encode_jpeg

    return bytes(encode_jpeg(image, quality=100).tolist())
