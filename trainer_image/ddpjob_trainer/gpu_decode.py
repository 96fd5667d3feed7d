"""`--decode gpu`: an ImageFolder's JPEGs decoded on the GPU (nvJPEG, through
torchvision.io.decode_jpeg), for when the CPU's DataLoader workers cannot keep up with
the GPU (few cores per GPU, a fast model).

The DataLoader's workers only read each file's bytes and draw its crop and flip, from
the size in the JPEG header (read without decoding). The training process decodes the
whole batch in one call on its device, then crops, resizes, flips and normalizes there.
The crop follows torchvision's RandomResizedCrop (scale 0.08-1, ratio 3/4-4/3, ten
tries, then the central crop) and evaluation its Resize(size*256/224) + CenterCrop, so
both decode paths train on the same distribution. The same code runs with the CPU as
the device, which is how it is tested without a GPU.
"""

from __future__ import annotations

import math
import os
import random

import torch
from torch.utils.data import Dataset

from . import UsageError

JPEG = (".jpg", ".jpeg")
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # ImageNet's, as the CPU path


def random_resized_crop(width: int, height: int, rng=random) -> tuple[int, int, int, int]:
    """(top, left, h, w): torchvision.transforms.RandomResizedCrop.get_params's algorithm."""
    area, log_ratio = width * height, (math.log(3 / 4), math.log(4 / 3))
    for _ in range(10):
        target = area * rng.uniform(0.08, 1.0)
        ratio = math.exp(rng.uniform(*log_ratio))
        w, h = round(math.sqrt(target * ratio)), round(math.sqrt(target / ratio))
        if 0 < w <= width and 0 < h <= height:
            return rng.randint(0, height - h), rng.randint(0, width - w), h, w
    ratio = width / height  # the fallback: the central crop within the ratio bounds
    if ratio < 3 / 4:
        w, h = width, round(width / (3 / 4))
    elif ratio > 4 / 3:
        h, w = height, round(height * (4 / 3))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def center_crop(width: int, height: int, image_size: int) -> tuple[int, int, int, int]:
    """Resize(shorter side to size*256/224) then CenterCrop(size), as one crop of the original."""
    side = round(min(width, height) * image_size / int(image_size * 256 / 224))
    return (height - side) // 2, (width - side) // 2, side, side


class EncodedImages(Dataset):
    """ImageFolder samples as (JPEG bytes, [top, left, h, w, flip], label)."""

    classes: list[str]  # the class names, as ImageFolder's (data.imagefolder sets them)

    def __init__(self, samples: list[tuple[str, int]], image_size: int, train: bool):
        bad = next((path for path, _ in samples if not path.lower().endswith(JPEG)), None)
        if bad is not None:
            raise UsageError(
                f"--decode gpu decodes JPEG files only, and the data has {os.path.basename(bad)}; use --decode cpu"
            )
        self.samples, self.image_size, self.train = samples, image_size, train

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int):
        from PIL import Image
        from torchvision.io import read_file

        path, label = self.samples[i]
        with Image.open(path) as image:  # the header only: no pixel is decoded here
            width, height = image.size
        if self.train:
            # Python's own generator: torch's DataLoader seeds it apart in every worker, and
            # the trainer seeds it per rank (state.seed_everything).
            crop, flip = random_resized_crop(width, height), random.random() < 0.5
        else:
            crop, flip = center_crop(width, height, self.image_size), False
        return read_file(path), torch.tensor([*crop, int(flip)]), label


def collate(batch):
    """((the JPEGs' bytes end to end, their lengths, their crops), labels): the loop's
    (x, y) with x still encoded. One buffer per batch, not one tensor per image: each
    tensor a worker sends costs a shared-memory file descriptor, and a batch's worth of
    them failed to cross (EBADF in the queue's feeder thread)."""
    data, params, labels = zip(*batch, strict=True)
    return (torch.cat(data), torch.tensor([len(b) for b in data]), torch.stack(params)), torch.tensor(labels)


def decode(
    data: torch.Tensor, lengths: torch.Tensor, params: torch.Tensor, image_size: int, device: torch.device
) -> torch.Tensor:
    """One batch (as `collate` made it): decoded on `device` in one call, cropped, resized,
    flipped, normalized."""
    from torchvision.io import ImageReadMode, decode_jpeg
    from torchvision.transforms.v2 import functional as TF

    images = decode_jpeg(list(data.split(lengths.tolist())), mode=ImageReadMode.RGB, device=device)
    out = torch.empty(len(images), 3, image_size, image_size, device=device)
    for k, (image, (top, left, h, w, flip)) in enumerate(zip(images, params.tolist(), strict=True)):
        image = TF.resized_crop(image, top, left, h, w, [image_size, image_size], antialias=True)
        out[k] = image.flip(-1) if flip else image
    mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=device).view(1, 3, 1, 1)
    return out.div_(255).sub_(mean).div_(std)
