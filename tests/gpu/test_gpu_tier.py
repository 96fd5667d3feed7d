"""The GPU tier: the paths that only a CUDA GPU exercises (issue: a GPU test tier).

Run on a GPU machine with `make test-gpu` (this directory plus the trainer's tests; the
operator's dependencies need not be installed). Without a GPU every test here is skipped,
saying why. Each test asserts what the run produced (status, metrics, checkpoints), not
only that it exited 0.

The budget: `make test-gpu` in 3 minutes on one H100 or H200, its start-up included
(docs/development.md, "The GPU tier"). What costs is starting processes (Python, torch,
CUDA: seconds each), not steps (milliseconds each for these models), so each test starts
as few as shows its point, and trains only as long as its assertion needs: one epoch, or
two where epochs are compared, of at most a few thousand samples. Each test's comment
`budget:` says what it starts and trains. The tests run on several xdist workers.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from tests.gpu.gpu_helpers import GPUS, ddpjob_run, needs_gpu, needs_triton, needs_two_gpus, train, write_job

pytestmark = [pytest.mark.gpu, pytest.mark.slow, needs_gpu, pytest.mark.timeout(600)]

# A script that reports what each process saw: its rank, its CUDA_VISIBLE_DEVICES, the backend.
PROBE = (
    "import os, json, torch, torch.distributed as dist; dist.init_process_group(os.environ['DDPJOB_BACKEND']); "
    "t = torch.ones(1, device='cuda'); dist.all_reduce(t); "
    "print('PROBE ' + json.dumps({'rank': dist.get_rank(), 'world': dist.get_world_size(), "
    "'visible': os.environ.get('CUDA_VISIBLE_DEVICES'), 'sum': t.item(), 'backend': dist.get_backend()}), "
    "flush=True); dist.destroy_process_group()"
)


def probes(output: str) -> list[dict]:
    return sorted(
        (json.loads(line.split("PROBE ", 1)[1]) for line in output.splitlines() if "PROBE " in line),
        key=lambda r: r["rank"],
    )


def metrics(tmp_path: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines() if line.strip()]


def losses(tmp_path: Path) -> tuple[float, float]:
    """The first and the last logged training loss."""
    seen = [m["loss"] for m in metrics(tmp_path) if m.get("event") == "step" and "loss" in m]
    assert seen, "the trainer logged no step loss"
    return seen[0], seen[-1]


# ---- ddpjob run on a GPU machine ----------------------------------------------------------


def test_a_one_gpu_job_runs_with_nccl_and_captures_its_step_by_default(tmp_path: Path) -> None:
    # budget: one `ddpjob run` of one process, 16 steps
    job = write_job(
        tmp_path,
        "gpu-one",
        ["ddpjob-launch", "ddpjob-train", "--epochs", "1", "--synthetic-size", "1024", "--eval-every", "0"],
    )
    code, output, status = ddpjob_run(tmp_path, str(job))
    assert code == 0, output[-3000:]
    assert status["phase"] == "Succeeded" and status["backend"] == "nccl" and status["worldSize"] == 1, status
    # No flag, one GPU: the step is a CUDA graph, said in one line (graph_step.plan).
    assert output.count("step: captured as one CUDA graph and replayed, the default on one GPU") == 1, output[-3000:]


@needs_two_gpus
def test_each_node_gets_its_own_gpu_slice(tmp_path: Path) -> None:
    # budget: one `ddpjob run` of two processes that all-reduce once
    job = write_job(tmp_path, "gpu-slices", [sys.executable, "-c", PROBE], nodes=2, backend="nccl")
    code, output, _status = ddpjob_run(tmp_path, str(job))
    assert code == 0, output[-3000:]
    seen = probes(output)
    assert [r["rank"] for r in seen] == [0, 1] and all(r["sum"] == 2 and r["backend"] == "nccl" for r in seen)
    assert len({r["visible"] for r in seen}) == 2, f"two nodes shared a GPU: {seen}"


def test_a_job_asking_for_more_gpus_than_here_is_refused_in_one_line(tmp_path: Path) -> None:
    # budget: one `ddpjob run` that starts no process
    job = write_job(tmp_path, "gpu-short", ["ddpjob-launch", "ddpjob-train"], nodes=GPUS + 1)
    code, output, _ = ddpjob_run(tmp_path, str(job), timeout=60)
    assert code != 0 and "spec.gpusPerNode" in output and f"this machine has {GPUS}" in output, output[-2000:]
    assert "Traceback" not in output


def test_cpu_flag_runs_a_gpu_job_with_gloo(tmp_path: Path) -> None:
    # budget: one `ddpjob run` of GPUS + 1 processes on the CPU, 4 steps
    job = write_job(
        tmp_path,
        "gpu-on-cpu",
        ["ddpjob-launch", "ddpjob-train", "--epochs", "1", "--synthetic-size", "512", "--eval-every", "0"],
        nodes=GPUS + 1,
    )
    code, output, status = ddpjob_run(tmp_path, "--cpu", str(job))
    assert code == 0, output[-3000:]
    assert status["phase"] == "Succeeded" and status["backend"] == "gloo", status


def test_two_processes_on_one_gpu_use_gloo_instead_of_crashing_in_nccl(tmp_path: Path) -> None:
    """Two local processes and one visible GPU: backend auto picks gloo with one notice line.
    Under DDP the model's forward and backward are graphs by default, the all-reduce eager
    (graphed_model.py), said in one line, and the model learns."""
    # budget: one launch of two processes, 16 steps
    r = train(
        tmp_path,
        "--epochs",
        "1",
        "--synthetic-size",
        "2048",
        "--eval-every",
        "0",
        "--log-every",
        "2",
        nproc=2,
        CUDA_VISIBLE_DEVICES="0",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "using gloo" in r.stdout + r.stderr and "Duplicate GPU" not in r.stderr
    said = "step: the model's forward and backward captured as CUDA graphs, the rest eager, by default under DDP"
    assert r.stdout.count(said) == 1 and "could not be captured" not in r.stdout, r.stdout[-3000:]
    first, last = losses(tmp_path)
    assert math.isfinite(last) and last < first, (first, last)


# ---- the trainer's GPU options ------------------------------------------------------------


@pytest.mark.parametrize(
    "flags",
    [
        ["--amp", "bf16"],
        ["--amp", "fp16"],  # with a GradScaler (its state is in the checkpoint)
        ["--model", "cnn", "--channels-last"],
        ["--model", "cnn", "--sync-bn"],
        ["--strategy", "dp"],
    ],
    ids=lambda f: "-".join(a.lstrip("-") for a in f),
)
def test_trainer_option_trains_on_the_gpu(tmp_path: Path, flags: list[str]) -> None:
    # budget: one launch, 64 steps (where eligible, captured: the default)
    r = train(tmp_path, "--epochs", "1", "--synthetic-size", "4096", "--log-every", "4", "--eval-every", "0", *flags)
    assert r.returncode == 0, r.stderr[-3000:]
    first, last = losses(tmp_path)
    assert math.isfinite(last) and last < first, f"{flags}: did not learn (loss {first} -> {last})"
    epochs = [
        json.loads(line)
        for line in (tmp_path / "metrics.jsonl").read_text().splitlines()
        if '"epoch"' in line and json.loads(line).get("event") == "epoch"
    ]
    assert epochs and all(e["peak_gpu_mib"] > 0 for e in epochs), epochs  # peak memory per configuration


@needs_triton
def test_compile_trains_on_the_gpu(tmp_path: Path) -> None:
    # budget: one launch, torch.compile's compilation, 100 steps: the choice's warm-up and
    # trial (3 + 2 x 4 blocks x 8 steps, compile_choice.py) end inside them
    r = train(
        tmp_path, "--epochs", "1", "--synthetic-size", "6400", "--log-every", "4", "--eval-every", "0", "--compile"
    )
    assert r.returncode == 0, r.stderr[-3000:]
    first, last = losses(tmp_path)
    assert math.isfinite(last) and last < first
    # It timed the compiled model against eager and kept the faster (compile_choice.py).
    final = next(m for m in metrics(tmp_path) if m.get("event") == "final")
    assert final["compile"] in ("compiled", "eager"), final
    said = [line for line in r.stdout.splitlines() if "--compile: 8-step blocks" in line]
    assert len(said) == 1 and "ms/step compiled" in said[0] and "ms/step eager" in said[0], r.stdout[-3000:]


def test_batch_size_auto_finds_a_batch_that_fits_and_trains(tmp_path: Path) -> None:
    # budget: one launch, the probe's ~30 tries of one step, then one or two steps
    r = train(tmp_path, "--epochs", "1", "--synthetic-size", "65536", "--batch-size", "auto", "--log-every", "5")
    assert r.returncode == 0, r.stderr[-3000:]
    chosen = [line for line in r.stderr.splitlines() if "--batch-size auto:" in line]
    assert chosen and int(chosen[0].split("auto: ")[1].split()[0]) >= 64, r.stderr[-3000:]
    _first, last = losses(tmp_path)
    assert math.isfinite(last)


def test_a_checkpoint_saved_on_the_gpu_resumes_and_loads_on_cpu(tmp_path: Path) -> None:
    import torch

    from ddpjob_trainer import checkpoint

    # budget: two launches, 8 steps each
    ckpt = tmp_path / "ckpt"
    first = train(tmp_path, "--epochs", "1", "--synthetic-size", "512", "--checkpoint-dir", str(ckpt), "--amp", "fp16")
    assert first.returncode == 0, first.stderr[-3000:]
    newest = checkpoint.newest(str(ckpt))  # map_location="cpu": a CPU-only reader can open it
    assert newest is not None, "no checkpoint was saved"
    path, payload = newest
    tensors = [v for v in payload["model"].values() if isinstance(v, torch.Tensor)]
    assert tensors and all(t.device.type == "cpu" for t in tensors) and payload["scaler"], path
    second = train(tmp_path, "--epochs", "2", "--synthetic-size", "512", "--checkpoint-dir", str(ckpt), "--amp", "fp16")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resumed from" in second.stdout + second.stderr and "continuing at epoch 2" in second.stdout + second.stderr
    newest = checkpoint.newest(str(ckpt))
    assert newest is not None and newest[1]["epoch"] == 2


def test_the_launcher_sets_nccl_defaults_for_its_workers(tmp_path: Path) -> None:
    # budget: one `ddpjob run` of a script that prints and exits
    script = tmp_path / "env_probe.py"
    script.write_text("import os; print('NCCL_ENV', os.environ.get('TORCH_NCCL_ASYNC_ERROR_HANDLING'))\n")
    job = write_job(tmp_path, "gpu-env", ["ddpjob-launch", str(script)], nproc=1)
    code, output, _ = ddpjob_run(tmp_path, str(job))
    assert code == 0, output[-3000:]
    assert "NCCL_ENV 1" in output


def test_the_cuda_images_python_dependencies_import() -> None:
    """What the trainer image's CUDA variant adds to its base (pyproject's `trainer` extra)."""
    # budget: imports in this process
    import prometheus_client  # noqa: F401  ddpjob-launch's /metrics
    import torch
    import torchvision
    import tqdm  # noqa: F401

    assert torch.version.cuda, "this torch has no CUDA build"
    assert torch.backends.cudnn.is_available() and torch.distributed.is_nccl_available()
    assert torchvision.io.decode_jpeg is not None


# ---- --cuda-graph: the step captured once and replayed ------------------------------------


def epoch_losses(tmp_path: Path) -> list[float]:
    return [m["loss"] for m in metrics(tmp_path) if m.get("event") == "epoch"]


@pytest.mark.parametrize(
    "flags",
    [
        [],
        ["--amp", "bf16"],
        ["--model", "cnn", "--channels-last", "--optimizer", "adamw", "--cuda-graph"],  # the flag asked for, too
    ],
    ids=lambda f: "-".join(a.lstrip("-") for a in f) or "fp32",
)
def test_the_captured_step_trains_as_the_eager_step_does(tmp_path: Path, flags: list[str]) -> None:
    # budget: two launches, 66 steps each.
    # 2,100 samples at batch 64: each epoch ends with a partial batch, which runs eagerly.
    common = ["--epochs", "2", "--synthetic-size", "2100", "--batch-size", "64", "--eval-every", "0", *flags]
    eager_dir, graph_dir = tmp_path / "eager", tmp_path / "graph"
    eager_dir.mkdir()
    graph_dir.mkdir()
    r = train(eager_dir, *[f for f in common if f != "--cuda-graph"], "--no-cuda-graph")
    assert r.returncode == 0, r.stderr[-3000:]
    r = train(graph_dir, *common)  # no flag: captured by default
    assert r.returncode == 0, r.stderr[-3000:]
    final = next(m for m in metrics(graph_dir) if m.get("event") == "final")
    steps = final["step"]
    # All but the warm-up steps and the two partial batches were replays.
    assert final["graph_replays"] == steps - 3 - 2, final
    eager, graph = epoch_losses(eager_dir), epoch_losses(graph_dir)
    assert len(eager) == len(graph) == 2 and graph[-1] < graph[0], (eager, graph)
    # The same steps on the same batches: the same losses, up to the capturable optimizer's
    # arithmetic on the GPU instead of the host.
    assert all(math.isclose(a, b, rel_tol=0.02) for a, b in zip(eager, graph, strict=True)), (eager, graph)


def test_a_replayed_step_makes_no_host_sync() -> None:
    # budget: in this process, 25 steps of a small MLP
    import torch
    from torch import nn

    from ddpjob_trainer.graph_step import CapturedStep
    from ddpjob_trainer.micro_step import MicroStep

    device = torch.device("cuda", 0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), fused=True, capturable=True)
    micro = MicroStep(model, torch.amp.GradScaler("cuda", enabled=False), None, device, 1, 1, graph_safe=True)
    step = CapturedStep(micro, optimizer)
    x, y = torch.randn(64, 1, 28, 28, device=device), torch.randint(0, 10, (64,), device=device)
    for _ in range(5):  # warm-up and capture
        step(x, y)
    before = [p.detach().clone() for p in model.parameters()]
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(20):
            step(x, y)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    assert step.replays == 22, step.replays
    assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True)), (
        "the replays changed no weight"
    )
    assert micro.window[1].item() > 0  # the metric sums were accumulated inside the graph


# ---- --decode gpu: JPEGs decoded by nvJPEG --------------------------------------------------


@pytest.mark.parametrize("decode", ["cpu", "gpu"])
def test_an_imagefolder_of_jpegs_trains_with_either_decoder(tmp_path: Path, decode: str) -> None:
    # budget: one launch with two DataLoader workers, 3 epochs of a few steps of a small
    # ImageFolder (the accuracy below needs them)
    from tests.trainer.trainer_helpers import write_imagefolder

    root = write_imagefolder(tmp_path / "data", per_class=32, size=40, ext="jpg")
    r = train(
        tmp_path,
        "--model",
        "cnn",
        "--data",
        f"imagefolder:{root}",
        "--image-size",
        "32",
        "--epochs",
        "3",
        "--batch-size",
        "16",
        "--workers",
        "2",
        "--log-every",
        "2",
        "--decode",
        decode,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    first, last = losses(tmp_path)
    assert math.isfinite(last) and last < first, (decode, first, last)
    final = next(m for m in metrics(tmp_path) if m.get("event") == "final")
    assert final["eval_accuracy"] > 0.5, final  # colour is the class: both decoders see it
