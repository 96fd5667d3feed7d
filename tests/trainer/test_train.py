"""ddpjob-train in one process (world size 1): learning, readers, strategies, resume,
and every kind of bad input ending in exit 2 with one error line."""

import os
import pathlib

import pytest
import torch

from ddpjob_trainer import checkpoint
from ddpjob_trainer.train import main
from tests.trainer.trainer_helpers import CONTRACT, clean_env, events, train, write_imagefolder, write_mnist

FAST = ["--synthetic-size", "512", "--batch-size", "32", "--log-every", "4"]
# A refusal that only a machine without a GPU gives (`make test-gpu` runs these tests on one).
cpu_only = pytest.mark.skipif(torch.cuda.is_available(), reason="a CPU-only refusal, and this machine has a CUDA GPU")


@pytest.fixture(autouse=True)
def no_contract(monkeypatch):
    for name in CONTRACT:
        monkeypatch.delenv(name, raising=False)


def test_learns_synthetic_data(tmp_path):
    m = tmp_path / "m.jsonl"
    assert main(["--epochs", "3", "--strategy", "single", "--metrics-file", str(m), *FAST]) == 0
    steps, epochs = events(m, "step"), events(m, "epoch")
    assert [e["epoch"] for e in epochs] == [1, 2, 3]
    assert steps[-1]["loss"] < steps[0]["loss"] / 2
    assert steps[0]["accuracy"] < 0.6 < epochs[-1]["accuracy"]
    assert epochs[-1]["eval_accuracy"] > 0.8
    final = events(m, "final")
    assert len(final) == 1 and final[0] == {**final[0], "epoch": 3, "restart": 0}
    assert {"loss", "accuracy", "samples_per_s", "eval_loss", "eval_accuracy"} <= set(final[0])


@pytest.mark.parametrize(
    "extra",
    [
        ["--strategy", "dp"],
        ["--optimizer", "sgd", "--lr", "0.05", "--grad-accum", "3"],
        ["--model", "cnn", "--channels-last", "--amp", "bf16", "--optimizer", "adamw"],
    ],
)
def test_strategies_and_options_run(tmp_path, extra):
    m = tmp_path / "m.jsonl"
    assert main(["--epochs", "2", "--metrics-file", str(m), *FAST, *extra]) == 0
    epochs = events(m, "epoch")
    assert epochs[1]["loss"] < epochs[0]["loss"]


def test_grad_accum_counts_optimizer_steps(tmp_path):
    m = tmp_path / "m.jsonl"
    # 512 samples / 32 = 16 micro-batches per epoch; 3 per step -> 6 steps (last one partial).
    assert main(["--epochs", "1", "--grad-accum", "3", "--metrics-file", str(m), *FAST]) == 0
    assert events(m, "final")[0]["step"] == 6


def test_mnist_files(tmp_path):
    write_mnist(tmp_path / "mnist")
    m = tmp_path / "m.jsonl"
    assert main(["--data", f"mnist:{tmp_path / 'mnist'}", "--epochs", "3", "--metrics-file", str(m), *FAST]) == 0
    assert events(m, "final")[0]["eval_accuracy"] > 0.7


def test_imagefolder_with_loader_workers(tmp_path):
    write_imagefolder(tmp_path / "img")
    m = tmp_path / "m.jsonl"
    assert (
        main(
            [
                "--data",
                f"imagefolder:{tmp_path / 'img'}",
                "--model",
                "cnn",
                "--image-size",
                "16",
                "--workers",
                "1",
                "--batch-size",
                "8",
                "--epochs",
                "2",
                "--metrics-file",
                str(m),
            ]
        )
        == 0
    )
    assert [e["epoch"] for e in events(m, "epoch")] == [1, 2]
    assert 0 <= events(m, "final")[0]["eval_accuracy"] <= 1


def test_resume_continues_at_next_epoch_with_identical_weights(tmp_path, capsys):
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert main(["--epochs", "4", "--checkpoint-dir", str(whole), *FAST]) == 0
    assert main(["--epochs", "2", "--checkpoint-dir", str(parts), *FAST]) == 0
    assert main(["--epochs", "4", "--checkpoint-dir", str(parts), *FAST]) == 0
    m = parts / "metrics.jsonl"  # default: next to the checkpoints
    assert [e["epoch"] for e in events(m, "epoch")] == [1, 2, 3, 4]
    assert [(r["epoch"], r["next_epoch"]) for r in events(m, "resume")] == [(2, 3)]
    a, b = checkpoint.newest(str(whole))[1]["model"], checkpoint.newest(str(parts))[1]["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    # Resuming a finished run trains nothing, says so, and still reports the final metrics.
    capsys.readouterr()
    assert main(["--epochs", "4", "--checkpoint-dir", str(parts), *FAST]) == 0
    assert events(m, "final")[-1]["accuracy"] == events(m, "epoch")[-1]["accuracy"]
    said = capsys.readouterr().out
    assert "continuing at epoch" not in said
    assert (
        f": training is complete (4 of 4 epoch(s) done), nothing is left to train; to start over, delete the "
        f"checkpoints in {parts} (`ddpjob run --fresh` does), or raise --epochs to train on"
    ) in said
    assert len(checkpoint.candidates(str(parts))) == 3  # --keep-checkpoints default


def _error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "error" in line]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--model", "transformer9"], "unknown model 'transformer9'"),
        (["--data", "imagenet:/x"], "unknown dataset"),
        (["--data", "mnist:/does/not/exist"], "does not exist"),
        pytest.param(["--amp", "fp16"], "needs a CUDA device", marks=cpu_only),
        pytest.param(
            ["--cuda-graph"], "--cuda-graph: a CUDA graph needs a CUDA device (this process has cpu)", marks=cpu_only
        ),
    ],
)
def test_bad_input_exits_2(argv, needle, capsys):
    assert main([*argv, *FAST]) == 2
    assert needle in _error_line(capsys)


@cpu_only
def test_batch_size_auto_on_a_cpu_is_refused_in_one_line(capsys):
    assert main([*FAST, "--batch-size", "auto"]) == 2  # the last --batch-size wins
    assert "--batch-size auto finds what fits in GPU memory and needs a CUDA device" in _error_line(capsys)


def test_bad_flag_value_exits_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--batch-size", "many"])
    assert e.value.code == 2 and "--batch-size" in _error_line(capsys)


def test_checkpoint_from_another_model_exits_2(tmp_path, capsys):
    assert main(["--epochs", "1", "--checkpoint-dir", str(tmp_path), *FAST]) == 0
    capsys.readouterr()
    assert main(["--model", "cnn", "--epochs", "2", "--checkpoint-dir", str(tmp_path), *FAST]) == 2
    assert "written for model 'mlp', not 'cnn'" in _error_line(capsys)


def test_corrupt_checkpoints(tmp_path, capsys):
    assert main(["--epochs", "2", "--checkpoint-dir", str(tmp_path), *FAST]) == 0
    newest, _older = [p for _, p in checkpoint.candidates(str(tmp_path))]
    os.truncate(newest, 100)
    assert main(["--epochs", "3", "--checkpoint-dir", str(tmp_path), *FAST]) == 0
    assert "skipping checkpoint" in capsys.readouterr().err
    assert events(tmp_path / "metrics.jsonl", "resume")[-1]["epoch"] == 1  # fell back to epoch 1
    for _, p in checkpoint.candidates(str(tmp_path)):
        pathlib.Path(p).write_bytes(b"junk")
    assert main(["--epochs", "3", "--checkpoint-dir", str(tmp_path), *FAST]) == 2
    assert "is readable" in _error_line(capsys)


def test_cli_end_to_end_exit_codes(tmp_path):
    r = train(["--model", "nope"])
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith("ddpjob-train: error: unknown model")
    r = train(["--epochs", "1"], clean_env(WORLD_SIZE="abc", RANK="0"))
    assert r.returncode == 2 and "WORLD_SIZE='abc'" in r.stderr
    r = train(["--epochs", "1"], clean_env(WORLD_SIZE="4"))
    assert r.returncode == 2 and "RANK is not set" in r.stderr
