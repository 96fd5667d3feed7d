"""Models by name: the seed tutorials' MLP, a small CNN, and torchvision classifiers."""

from __future__ import annotations

import torch
from torch import nn

from . import UsageError

OWN_MODELS = ("mlp", "cnn")


def mlp(in_features: int, num_classes: int) -> nn.Module:
    # 784-512-256-10 on MNIST: the model of the PyTorch DDP tutorials this replaces.
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(in_features, 512),
        nn.ReLU(),
        nn.Linear(512, 256),
        nn.ReLU(),
        nn.Linear(256, num_classes),
    )


def cnn(channels: int, num_classes: int) -> nn.Module:
    # Small enough for CPU tests; BatchNorm so that --sync-bn has something to convert;
    # adaptive pooling so that any image size works.
    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())

    return nn.Sequential(
        block(channels, 32),
        nn.MaxPool2d(2),
        block(32, 64),
        nn.MaxPool2d(2),
        block(64, 128),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(128, num_classes),
    )


class GrayToRGB(nn.Module):
    """torchvision classifiers take 3 channels; repeat a grayscale channel (no copy)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] == 1:
            x = x.expand(-1, 3, -1, -1)
        return self.model(x)


def torchvision_names() -> list[str]:
    import torchvision

    return sorted(torchvision.models.list_models(module=torchvision.models))


def build_model(name: str, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    channels = input_shape[0]
    if name == "mlp":
        features = 1
        for dim in input_shape:
            features *= dim
        return mlp(features, num_classes)
    if name == "cnn":
        return cnn(channels, num_classes)
    import torchvision

    if name not in torchvision_names():
        raise UsageError(
            f"unknown model {name!r}: use mlp, cnn or a torchvision classifier "
            "(resnet18, resnet50, mobilenet_v3_small, ...)"
        )
    # weights=None: random init; the image has no network and tests never download.
    model = torchvision.models.get_model(name, weights=None, num_classes=num_classes)
    return GrayToRGB(model) if channels == 1 else model
