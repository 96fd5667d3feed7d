"""`ddpjob run`: real processes, real gloo rendezvous, on this machine."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

SCRIPTS = Path(__file__).parent / "scripts"
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
pytestmark = pytest.mark.slow


def write_job(tmp_path, name="probe", nodes=2, nproc=2, command=None, env=None, **spec):
    probe_dir = tmp_path / "out"
    probe_dir.mkdir(exist_ok=True)
    body = {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {"name": name},
        "spec": {
            "nodes": nodes,
            "nprocPerNode": nproc,
            "image": "local",
            "command": command or [*TORCHRUN, str(SCRIPTS / "allreduce_probe.py")],
            "env": [{"name": "DDPJOB_TEST_PROBE_DIR", "value": str(probe_dir)}] + (env or []),
            "restartBackoffSeconds": 0,
            **spec,
        },
    }
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(body))
    return path, probe_dir


def ddpjob(*args, cwd, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "ddpjob.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def records(probe_dir, pattern):
    return sorted((json.loads(p.read_text()) for p in probe_dir.glob(pattern)), key=lambda r: r["rank"])


def test_two_nodes_two_processes_rendezvous_and_allreduce(tmp_path):
    path, out = write_job(tmp_path)
    result = ddpjob("run", "-o", "yaml", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    recs = records(out, "rank*-attempt0.json")
    assert [r["rank"] for r in recs] == [0, 1, 2, 3]
    for r in recs:
        assert r["RANK"] == str(r["rank"]) and r["WORLD_SIZE"] == "4" and r["world"] == 4
        assert r["LOCAL_RANK"] == str(r["rank"] % 2) and r["NODE_RANK"] == str(r["rank"] // 2)
        assert r["MASTER_ADDR"] == "127.0.0.1" and r["DDPJOB_BACKEND"] == "gloo"
        assert r["allreduce"] == 1 + 2 + 3 + 4
    assert len({r["MASTER_PORT"] for r in recs}) == 1
    assert "[probe-0] " in result.stdout and "[probe-1] " in result.stdout
    status = yaml.safe_load(result.stdout.split("\n---\n")[-1])["status"]
    assert status["phase"] == "Succeeded" and status["restarts"] == 0 and status["readyNodes"] == 2


def test_a_killed_process_restarts_the_gang_which_then_succeeds(tmp_path):
    path, out = write_job(tmp_path, env=[{"name": "DDPJOB_TEST_PROBE_CRASH_RANK", "value": "1"}])
    result = ddpjob("run", "-o", "yaml", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    status = yaml.safe_load(result.stdout.split("\n---\n")[-1])["status"]
    assert status["phase"] == "Succeeded" and status["restarts"] == 1
    assert status["lastFailure"]["pod"] == "probe-0"
    second = records(out, "rank*-attempt1.json")
    assert [r["rank"] for r in second] == [0, 1, 2, 3]
    assert all(r["DDPJOB_RESTART_COUNT"] == "1" for r in second)
    first_port = records(out, "rank*-attempt0.json")[0]["MASTER_PORT"]
    assert second[0]["MASTER_PORT"] != first_port  # a fresh port for the new rendezvous


def test_exit_code_policy_stops_on_a_program_error(tmp_path):
    path, out = write_job(
        tmp_path,
        nodes=2,
        nproc=1,
        command=[sys.executable, str(SCRIPTS / "allreduce_probe.py")],
        env=[
            {"name": "DDPJOB_TEST_PROBE_CRASH_RANK", "value": "0"},
            {"name": "DDPJOB_TEST_PROBE_CRASH_CODE", "value": "3"},
        ],
        restartPolicy="ExitCode",
    )
    result = ddpjob("run", "-o", "yaml", str(path), cwd=tmp_path)
    assert result.returncode == 1
    status = yaml.safe_load(result.stdout.split("\n---\n")[-1])["status"]
    assert status["phase"] == "Failed" and status["restarts"] == 0
    assert status["lastFailure"]["exitCode"] == 3 and status["lastFailure"]["pod"] == "probe-0"
    assert not list(out.glob("*attempt1*"))


def test_plain_env_script_runs_unchanged_one_process_per_pod(tmp_path):
    path, out = write_job(tmp_path, nodes=2, nproc=1, command=[sys.executable, str(SCRIPTS / "env_only.py")])
    result = ddpjob("run", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    recs = records(out, "env-only-rank*.json")
    assert [(r["rank"], r["world"], r["sum"]) for r in recs] == [(0, 2, 3.0), (1, 2, 3.0)]


def test_the_readme_progress_recipe_without_the_package_works_and_a_rerun_starts_empty(tmp_path):
    command = [sys.executable, str(SCRIPTS / "progress_by_hand.py")]
    path, _ = write_job(tmp_path, nodes=1, nproc=1, command=command)
    first = ddpjob("run", "-o", "yaml", str(path), cwd=tmp_path)
    # The record's directory exists before the script starts, as the Pod's emptyDir does.
    assert first.returncode == 0, first.stdout + first.stderr
    assert "FileNotFoundError" not in first.stdout
    assert "summary: epoch 3/3 step 48/48 (100%)" in first.stdout  # the final status's progress, complete
    # The same job again, --fresh or not, writing no record: the last run's 48/48 is not its progress.
    path, _ = write_job(
        tmp_path, nodes=1, nproc=1, command=command, env=[{"name": "DDPJOB_TEST_PROGRESS_STEPS", "value": "0"}]
    )
    for flags in ((), ("--fresh",)):
        again = ddpjob("run", "-o", "yaml", *flags, str(path), cwd=tmp_path)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "step 48/48" not in again.stdout, flags  # neither a progress line nor the status


def test_missing_program_is_a_clear_error(tmp_path):
    path, _ = write_job(tmp_path, command=["no-such-trainer-binary"])
    result = ddpjob("run", str(path), cwd=tmp_path)
    assert result.returncode == 1
    assert "spec.command: 'no-such-trainer-binary' is not installed" in result.stdout


def test_a_misspelt_launcher_is_said_as_a_typo_and_never_retried(tmp_path):
    path, _ = write_job(tmp_path, command=["ddpjob-lanch"], restartPolicy="OnFailure", maxRestarts=3)
    result = ddpjob("run", str(path), cwd=tmp_path)
    assert result.returncode == 1
    assert "did you mean 'ddpjob-launch'?" in result.stderr and "is not a launcher" not in result.stderr
    assert "error: spec.command: 'ddpjob-lanch' is not installed" in result.stdout
    assert "attempt 1" not in result.stdout and "restarting" not in result.stdout


def interrupt_run(tmp_path, path, pid_dir, expected):
    """Start `ddpjob run`, wait until `expected` pid files exist, Ctrl-C it; the pids and its output."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ddpjob.cli", "run", "-o", "yaml", str(path)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        # A pid file is whole once its line ends: `echo $$ > f` creates it empty first.
        while time.monotonic() < deadline and not (
            len(files := list(pid_dir.iterdir())) >= expected and all(f.read_text().endswith("\n") for f in files)
        ):
            time.sleep(0.1)
        pids = [int(p.read_text()) for p in pid_dir.iterdir()]
        assert len(pids) == expected
        for pid in pids:
            os.kill(pid, 0)  # alive before the interrupt
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, pids, output


def assert_gone(pids, within=5.0):
    deadline = time.monotonic() + within
    while True:
        alive = [pid for pid in pids if _alive(pid)]
        if not alive or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    assert not alive, f"still running: {alive}"


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ctrl_c_stops_every_process(tmp_path):
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    command = ["sh", "-c", f"echo $$ > {pid_dir}/$DDPJOB_NAME-$NODE_RANK; exec sleep 300"]
    path, _ = write_job(tmp_path, name="sleeper", nodes=3, nproc=1, command=command)
    code, pids, output = interrupt_run(tmp_path, path, pid_dir, expected=3)
    assert code == 130, output
    assert "interrupted" in output
    assert_gone(pids, within=0)
    # The conditions follow the phase: Failed=True (Interrupted), nothing left True besides.
    status = yaml.safe_load(output.split("\n---\n")[-1])["status"]
    conditions = {c["type"]: c for c in status["conditions"]}
    assert status["phase"] == "Failed" and conditions["Failed"]["status"] == "True"
    assert conditions["Failed"]["reason"] == "Interrupted"
    assert [t for t, c in conditions.items() if c["status"] == "True"] == ["Failed"]
    # Nothing runs any more, and NODES says so beside readyNodes.
    assert (status["readyNodes"], status["nodes"]) == (0, "0/3")


def test_processes_that_left_the_session_are_stopped_with_their_container(tmp_path):
    # torchrun and ddpjob-launch start children in sessions of their own; a process-group
    # signal misses them, so the container's tag must find them.
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    command = ["sh", "-c", f"setsid sleep 300 & echo $! > {pid_dir}/escaped; exec sleep 300"]
    path, _ = write_job(tmp_path, name="escaper", nodes=1, nproc=1, command=command)
    code, (escaped,), output = interrupt_run(tmp_path, path, pid_dir, expected=1)
    assert code == 130, output
    assert_gone([escaped])


def test_the_example_job_runs_here_as_make_demo_does(tmp_path):
    """`make demo`: the example file itself, the built-in trainer, 2 nodes x 2 processes."""
    example = Path(__file__).resolve().parents[2] / "manifests" / "examples" / "mnist-cpu.yaml"
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    result = subprocess.run(
        [sys.executable, "-m", "ddpjob.cli", "run", "-o", "yaml", str(example)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    status = yaml.safe_load(result.stdout.split("\n---\n")[-1])["status"]
    assert status["phase"] == "Succeeded" and status["readyNodes"] == 2
    assert "[mnist-cpu-0] " in result.stdout and "epoch 3/3 done" in result.stdout


def test_ctrl_c_of_the_built_in_trainer_is_quiet_saves_and_stops_everything(tmp_path):
    """Ctrl-C mid-training: the trainer says once that it stops and saves its checkpoint,
    torchrun's own stop warnings ("Received 15 death signal", "Sending process ... closing
    signal") are not printed, no worker needs SIGKILL, and no process of the run is left."""
    from ddpjob.local.process_tags import CONTAINER_TAG_ENV, pids_with_env

    command = [
        "ddpjob-launch",
        "ddpjob-train",
        "--model",
        "mlp",
        "--data",
        "synthetic",
        "--epochs",
        "1000",
        "--log-every",
        "4",
    ]
    path, _ = write_job(tmp_path, name="quiet", nodes=2, nproc=2, command=command, checkpoint={"claimName": "c"})
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ddpjob.cli", "run", str(path)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines, before = [], []
    try:
        deadline = time.monotonic() + 240  # four trainers import torch on a busy machine
        for line in proc.stdout:
            before.append(line)
            if "epoch 2/1000 done" in line or time.monotonic() > deadline:
                break
        assert "epoch 2/1000 done" in before[-1], "".join(before)[-3000:]
        proc.send_signal(signal.SIGINT)
        lines = proc.stdout.readlines()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    after = "".join(lines)
    assert proc.returncode == 130, after[-3000:]
    # Every node gets SIGTERM, one after another, and the ranks agree on stopping at a step
    # boundary: rank 0 names its own signal when it had it by then, otherwise another
    # rank's (a busy machine delivers rank 0's later: seen in a cold CI run).
    said = [line for line in lines if line.startswith("[quiet-0] stop requested")]
    assert said in (
        ["[quiet-0] stop requested (signal 15): saving a checkpoint\n"],
        ["[quiet-0] stop requested (signal on another rank): saving a checkpoint\n"],
    ), after[-3000:]
    for noise in ("death signal", "closing signal", "Unable to shutdown process", "Traceback"):
        assert noise not in after, after[-3000:]
    stop = next(i for i, line in enumerate(lines) if "stop requested" in line)
    saved = [line for line in lines[stop:] if line.startswith("[quiet-0] checkpoint ")]
    assert len(saved) == 1 and Path(saved[0].split()[-1]).is_file()  # the stop's own checkpoint
    assert pids_with_env(CONTAINER_TAG_ENV, f"ddpjob-run-{proc.pid}-") == []
