"""`ddpjob-train` flags. argparse exits 2 with one error line on a bad flag, which is
exactly the "bad input" exit code the operator treats as permanent."""

from __future__ import annotations

import argparse
import os

from ddpjob import contract

AUTO_BATCH = 0  # args.batch_size of `--batch-size auto` (batch_probe.py finds the number)


def batch_size(text: str) -> int:
    """--batch-size: a positive integer, or `auto`."""
    if text == "auto":
        return AUTO_BATCH
    value = int(text)
    if value <= 0:
        raise ValueError(text)
    return value


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {kind.__name__}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
        return value

    parse.__name__ = kind.__name__
    return parse


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an int") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 0")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ddpjob-train",
        description="The built-in DDP trainer. Start it with ddpjob-launch (or torchrun).",
    )
    a = p.add_argument
    a("--model", default="mlp", help="mlp (784-512-256-10), cnn, or a torchvision classifier (resnet18, ...)")
    a("--data", default="synthetic", help="synthetic | mnist:DIR | cifar10:DIR | imagefolder:DIR")
    # 4096 MNIST-shaped samples: an example job of 2 nodes x 2 processes on 2 cores
    # trains 3 epochs in a few seconds.
    a("--synthetic-size", type=_positive(int), default=4096, help="training samples of --data synthetic")
    a("--download", action="store_true", help="download MNIST/CIFAR-10 into DIR if missing")
    a("--image-size", type=_positive(int), default=224, help="imagefolder crop size")
    a("--workers", type=_non_negative, default=None, help="DataLoader workers per process (imagefolder)")
    a(
        "--decode",
        choices=("cpu", "gpu"),
        default="cpu",
        help="imagefolder JPEGs: decoded by the workers (cpu) or in one batched nvJPEG call on the GPU (gpu)",
    )
    a("--epochs", type=_positive(int), default=3)
    a(
        "--batch-size",
        type=batch_size,
        default=64,
        help="per process; auto: the largest whose step fits this GPU (tried, then 90%% of it; CUDA only)",
    )
    a("--lr", type=_positive(float), default=1e-3)
    a("--optimizer", choices=("adam", "adamw", "sgd"), default="adam")
    a("--momentum", type=float, default=0.9, help="sgd only")
    a("--weight-decay", type=float, default=0.0)
    a("--amp", choices=("none", "bf16", "fp16"), default="none", help="autocast dtype (fp16 needs CUDA)")
    a("--compile", action="store_true", help="torch.compile the model")
    a(
        "--cuda-graph",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="replay each step as one captured CUDA graph (one process, adam/adamw, fixed batch; CUDA only). "
        "Default: wherever eligible, saying so in one line, or why not; --cuda-graph insists, --no-cuda-graph: eager",
    )
    a("--channels-last", action="store_true", help="NHWC memory format (faster convolutions on GPU)")
    a("--sync-bn", action="store_true", help="SyncBatchNorm across ranks (ddp only)")
    a("--grad-accum", type=_positive(int), default=1, help="micro-batches per optimizer step (no_sync between)")
    a("--eval-every", type=_non_negative, default=1, help="evaluate every N epochs and after the last; 0: never")
    a("--seed", type=int, default=0)
    a(
        "--strategy",
        choices=("ddp", "dp", "single"),
        default="ddp",
        help="ddp (default); dp = torch.nn.DataParallel in one process, for comparison only; single",
    )
    a(
        "--checkpoint-dir",
        default=os.environ.get(contract.CHECKPOINT_DIR) or None,
        help="default: $DDPJOB_CHECKPOINT_DIR; no checkpoints when unset",
    )
    a("--checkpoint-every", type=_positive(int), default=1, help="epochs between checkpoints")
    a("--keep-checkpoints", type=_positive(int), default=3, help="keep the newest K")
    a("--metrics-file", default=None, help="JSON-lines metrics; default: CHECKPOINT_DIR/metrics.jsonl")
    a("--log-every", type=_positive(int), default=50, help="optimizer steps between progress lines")
    a(
        "--checkpoint-every-steps",
        type=_non_negative,
        default=0,
        help="also checkpoint every N optimizer steps (an elastic job redoes at most N after a lost node); 0: off",
    )
    a(
        "--global-batch-size",
        type=_positive(int),
        default=None,
        help="elastic jobs: samples per global micro-batch at every size (default: batch size x procs x maxNodes)",
    )
    a("--sample-log", default=None, help="write which samples went into which step to DIR (the exactly-once audit)")
    return p


def refuse_for_device(args: argparse.Namespace, device_type: str, world_size: int) -> None:
    """UsageError for flags this device or world cannot honour."""
    from . import UsageError

    cuda = device_type == "cuda"
    if args.strategy != "ddp" and world_size > 1:
        raise UsageError(f"--strategy {args.strategy} runs in one process, but WORLD_SIZE={world_size}")
    if args.amp == "fp16" and not cuda:
        raise UsageError("--amp fp16 needs a CUDA device (use bf16 on CPU)")
    if args.decode == "gpu" and not cuda:
        raise UsageError("--decode gpu decodes JPEGs with nvJPEG and needs a CUDA device: use --decode cpu")
    if args.sync_bn and not cuda and args.strategy == "ddp" and world_size > 1:
        raise UsageError("--sync-bn needs CUDA devices (torch's SyncBatchNorm only works with GPU modules)")
    if args.batch_size == AUTO_BATCH and not cuda:
        raise UsageError("--batch-size auto finds what fits in GPU memory and needs a CUDA device: give a number")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    args = parser().parse_args(argv)
    if args.metrics_file is None and args.checkpoint_dir:
        args.metrics_file = os.path.join(args.checkpoint_dir, "metrics.jsonl")
    return args
