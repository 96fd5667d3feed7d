"""`ddpjob run`'s sharp edges: a GPU job on a machine without GPUs (one line, before any
process; `--cpu` runs it), GPUs shared out per node, a rerun of a finished job (said, and
`--fresh`), Ctrl-C's conditions, observedGeneration, and the project's own commands found
beside the interpreter when its bin is not on PATH."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ddpjob.api.spec import parse_job
from ddpjob.local import gpus
from ddpjob.local.container import find_program, interpreter_bin

NO_GPUS = {"CUDA_VISIBLE_DEVICES": "-1"}  # whatever this machine has, the run sees none


def run(tmp_path: Path, *argv: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ddpjob.cli", *argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def write(tmp_path: Path, name: str, command: list[str], **spec) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "ddpjob.io/v1alpha1",
                "kind": "DDPJob",
                "metadata": {"name": name},
                "spec": {"image": "local", "command": command, "restartBackoffSeconds": 0, **spec},
            }
        )
    )
    return path


def final_status(stdout: str) -> dict:
    return yaml.safe_load(stdout.split("\n---\n")[-1])["status"]


# ---- GPUs -------------------------------------------------------------------------


def test_visible_gpus_reads_the_device_files_and_the_mask(tmp_path):
    for name in ("nvidia0", "nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm"):
        (tmp_path / name).touch()
    assert gpus.visible_gpus(tmp_path, {"PATH": ""}) == ["0", "1", "2"]
    assert gpus.visible_gpus(tmp_path, {"CUDA_VISIBLE_DEVICES": "2,0"}) == ["2", "0"]
    assert gpus.visible_gpus(tmp_path, {"CUDA_VISIBLE_DEVICES": "1,7,0"}) == ["1"]  # CUDA stops at a bad id
    assert gpus.visible_gpus(tmp_path, {"CUDA_VISIBLE_DEVICES": "-1"}) == []
    assert gpus.visible_gpus(tmp_path, {"CUDA_VISIBLE_DEVICES": ""}) == []
    assert gpus.visible_gpus(tmp_path / "missing", {"PATH": str(tmp_path / "no-bin")}) == []


def test_without_device_files_nvidia_smi_lists_the_gpus(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 (UUID: GPU-a)'\necho 'GPU 1: NVIDIA H100 (UUID: GPU-b)'\n")
    smi.chmod(0o755)
    env = {"PATH": str(bin_dir)}
    assert gpus.visible_gpus(tmp_path / "empty-dev", env) == ["0", "1"]
    assert gpus.visible_gpus(tmp_path / "empty-dev", {**env, "CUDA_VISIBLE_DEVICES": "1"}) == ["1"]


def test_each_node_gets_its_own_gpus():
    job = parse_job({"metadata": {"name": "g"}, "spec": {"image": "x", "nodes": 2, "gpusPerNode": 2}})
    available = ["3", "2", "1", "0"]
    assert gpus.gpu_error(job, available) is None
    assert [gpus.devices_for_node(job, r, available) for r in (0, 1)] == [
        {"CUDA_VISIBLE_DEVICES": "3,2"},
        {"CUDA_VISIBLE_DEVICES": "1,0"},
    ]
    assert "asks for 2 GPUs on each of 2 nodes (4 in all) and this machine has 3" in gpus.gpu_error(job, ["0"] * 3)
    cpu = gpus.on_cpu(job)
    assert (cpu.gpus_per_node, cpu.backend, cpu.world_size) == (0, "gloo", job.world_size)
    assert gpus.devices_for_node(cpu, 1, available) == {}


def test_a_gpu_job_without_gpus_fails_in_one_line_before_starting_anything(tmp_path):
    marker = tmp_path / "started"
    path = write(tmp_path, "gpu", ["sh", "-c", f"touch {marker}"], nodes=2, gpusPerNode=1, backend="nccl")
    done = run(tmp_path, "run", "-f", str(path), env=NO_GPUS)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (
        f"error: {path}: spec.gpusPerNode: the job asks for 1 GPU on each of 2 nodes (2 in all) "
        "and this machine has 0; run it on CPU with `ddpjob run --cpu` (gloo, 1 process per "
        "node)\n"
    )
    assert not marker.exists()


def test_cpu_runs_a_gpu_job_on_cpu_with_gloo_and_no_gpu(tmp_path):
    out = tmp_path / "seen"
    path = write(
        tmp_path,
        "gpu",
        ["sh", "-c", f'echo "$DDPJOB_BACKEND [$CUDA_VISIBLE_DEVICES] $WORLD_SIZE" > {out}'],
        gpusPerNode=2,
        nprocPerNode=1,
        backend="nccl",
    )
    done = run(tmp_path, "run", "-o", "yaml", "--cpu", "-f", str(path), env=NO_GPUS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert out.read_text() == "gloo [] 1\n"
    assert final_status(done.stdout)["backend"] == "gloo"


def test_cpu_refuses_up_front_what_needs_cuda_naming_the_argument(tmp_path):
    marker = tmp_path / "started"
    path = write(
        tmp_path,
        "gpu",
        ["sh", "-c", f"touch {marker}", "--sync-bn", "--amp=fp16", "--backend", "nccl"],
        gpusPerNode=1,
        env=[{"name": "MY_BACKEND", "value": "NCCL"}],
    )
    done = run(tmp_path, "run", "--cpu", "-f", str(path), env=NO_GPUS)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"{path}: spec.command[3]: --sync-bn needs CUDA devices (SyncBatchNorm); "
        "remove it to run on CPU (ddpjob run --cpu)",
        f"{path}: spec.command[4]: --amp fp16 needs a CUDA device; use --amp bf16 on CPU (ddpjob run --cpu)",
        f"{path}: spec.command[6]: nccl needs GPUs; use gloo on CPU (ddpjob run --cpu)",
        f"{path}: spec.env[0].value: nccl needs GPUs; use gloo on CPU (ddpjob run --cpu)",
    ]
    assert not marker.exists()


def test_the_resnet_example_is_not_sent_to_cpu_which_cannot_run_it(tmp_path):
    example = Path(__file__).resolve().parents[2] / "manifests" / "examples" / "resnet-gpu.yaml"
    done = run(tmp_path, "run", "-f", str(example), env=NO_GPUS)
    assert done.returncode == 1 and done.stdout == ""
    assert "this machine has 0; `ddpjob run --cpu` cannot run it as written: spec.args[" in done.stderr
    assert "--sync-bn needs CUDA devices" in done.stderr and "run it on CPU with" not in done.stderr
    # And --cpu itself says why at once, not 32 ranks a minute later.
    cpu = run(tmp_path, "run", "--cpu", "-f", str(example), env=NO_GPUS)
    assert cpu.returncode == 1 and "spec.args[12]: --sync-bn needs CUDA devices" in cpu.stderr
    assert len(cpu.stderr.splitlines()) == 1


def test_the_same_failure_on_every_attempt_is_said_with_its_error_line(tmp_path):
    path = write(
        tmp_path,
        "same",
        ["sh", "-c", "echo starting; echo 'error: no CUDA device' >&2; exit 2"],
        maxRestarts=3,
        restartBackoffSeconds=0,
    )
    done = run(tmp_path, "run", "-o", "yaml", "-f", str(path), env=NO_GPUS)
    assert done.returncode == 1
    status = final_status(done.stdout)
    assert status["lastFailure"]["errorLine"] == "error: no CUDA device"
    assert status["lastFailure"]["sameOnAttempts"] == 2
    assert status["message"] == (
        "Pod same-0 failed (exit code 2, Error): error: no CUDA device; the same failure "
        "on all 2 attempts, before any training progress: not retried again "
        "(restartPolicy: ExitCode fails at once on exit codes 1-127)"
    )


# ---- a rerun, --fresh, the final status -------------------------------------------------


def test_a_run_ends_with_a_line_of_summary_and_its_whole_status_on_asking(tmp_path):
    path = write(tmp_path, "brief", ["sh", "-c", "exit 0"])
    done = run(tmp_path, "run", str(path))
    assert done.returncode == 0 and "acceptedSpec" not in done.stdout and "\n---\n" not in done.stdout
    last = done.stdout.splitlines()[-1]
    assert re.fullmatch(
        r"\[ddpjob\] Succeeded in \d+s; its whole status: \.ddpjob/brief/status\.yaml "
        r"\(`ddpjob run -o yaml` prints it\)",
        last,
    ), done.stdout
    assert final_status(run(tmp_path, "run", "-o", "yaml", str(path)).stdout)["phase"] == "Succeeded"
    failed = write(tmp_path, "brief", ["sh", "-c", "exit 3"], restartPolicy="ExitCode", maxRestarts=1)
    last = run(tmp_path, "run", str(failed)).stdout.splitlines()[-1]
    assert re.fullmatch(r"\[ddpjob\] Failed in \d+s; its whole status: .*", last), last


def test_a_rerun_of_a_finished_job_says_so_and_fresh_starts_over(tmp_path):
    # The "trainer" counts its runs in the checkpoint dir, as a resumed trainer would see them.
    command = ["sh", "-c", 'echo run >> "$DDPJOB_CHECKPOINT_DIR/runs"']
    path = write(tmp_path, "resume", command, checkpoint={"claimName": "ckpt"})
    runs = tmp_path / ".ddpjob" / "resume" / "checkpoints" / "runs"
    first = run(tmp_path, "run", "-o", "yaml", str(path))
    assert first.returncode == 0 and "here before" not in first.stdout and "already Succeeded" not in first.stdout
    status = final_status(first.stdout)
    assert status["observedGeneration"] == 1  # a file has no generation; a new object has 1
    assert (status["nprocPerNode"], status["backend"], status["worldSize"]) == (1, "gloo", 1)
    second = run(tmp_path, "run", str(path))
    assert second.returncode == 0 and runs.read_text() == "run\nrun\n"
    # Not ddpjob-train: what a program makes of its checkpoints is its own, so it runs again.
    assert (
        f"[ddpjob] this job already Succeeded here (at {status['completionTime']}): its program resumes from "
        f"the checkpoints in {runs.parent} (ddpjob-train trains only what the job asks beyond them: more "
        "epochs). `ddpjob run --fresh` starts over"
    ) in second.stdout
    third = run(tmp_path, "run", "--fresh", str(path))
    assert third.returncode == 0 and "already Succeeded" not in third.stdout
    assert runs.read_text() == "run\n"


def test_a_rerun_of_the_same_finished_ddpjob_train_job_starts_nothing(tmp_path):
    # A stand-in for ddpjob-train, counting the runs it was started for.
    trainer = tmp_path / "bin" / "ddpjob-train"
    trainer.parent.mkdir()
    trainer.write_text('#!/bin/sh\necho run >> "$DDPJOB_CHECKPOINT_DIR/runs"\n')
    trainer.chmod(0o755)
    path = write(tmp_path, "done", [str(trainer)], args=["--epochs", "2"], checkpoint={"claimName": "ckpt"})
    runs = tmp_path / ".ddpjob" / "done" / "checkpoints" / "runs"
    first = run(tmp_path, "run", "-o", "yaml", str(path))
    assert first.returncode == 0 and runs.read_text() == "run\n"
    second = run(tmp_path, "run", "-o", "yaml", str(path))
    assert second.returncode == 0 and runs.read_text() == "run\n"  # nothing started
    status = final_status(first.stdout)
    assert final_status(second.stdout) == status
    assert (
        f"[ddpjob] this job already Succeeded here (at {status['completionTime']}) with this very spec: "
        f"ddpjob-train would resume from its final checkpoint in {runs.parent} with nothing left to train, "
        "so nothing was started. `ddpjob run --fresh` trains it again"
    ) in second.stdout
    # Another spec (more epochs) trains on from the checkpoint; --fresh starts over.
    path = write(tmp_path, "done", [str(trainer)], args=["--epochs", "3"], checkpoint={"claimName": "ckpt"})
    assert run(tmp_path, "run", str(path)).returncode == 0 and runs.read_text() == "run\nrun\n"
    assert run(tmp_path, "run", "--fresh", str(path)).returncode == 0 and runs.read_text() == "run\n"


# ---- the project's own commands ---------------------------------------------------------


def test_own_commands_are_found_beside_the_interpreter_without_path(tmp_path):
    """`.venv/bin/ddpjob run` with the venv not activated: ddpjob-launch is beside python."""
    if not (Path(interpreter_bin()) / "ddpjob-launch").exists():
        pytest.skip(f"ddpjob-launch is not installed beside {sys.executable}")
    out = tmp_path / "seen"
    path = write(tmp_path, "own", ["ddpjob-launch"], args=["sh", "-c", f'echo "$RANK/$WORLD_SIZE" > {out}'])
    done = run(tmp_path, "run", str(path), env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert out.read_text() == "0/1\n"
    assert find_program("ddpjob-launch") == str(Path(interpreter_bin()) / "ddpjob-launch")
    assert find_program("no-such-program-here") is None
