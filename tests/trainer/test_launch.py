import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from ddpjob_trainer import EXIT_RENDEZVOUS_TIMEOUT, RendezvousTimeout, UsageError
from ddpjob_trainer.env import LaunchEnv
from ddpjob_trainer.launch import build_command, wait_for_dns
from tests.support.deadlines import RUN
from tests.trainer.trainer_helpers import BIN, clean_env, contract, launch

NODE = LaunchEnv(2, 1, 2, "j-0.j", 29500, True)


def test_ddpjob_train_runs_as_torchrun_module():
    argv, torchrun = build_command(NODE, ["ddpjob-train", "--epochs", "1"])
    assert torchrun
    assert argv[1:3] == ["-m", "ddpjob_trainer._torchrun"]
    for flag, value in (
        ("--nnodes", "2"),
        ("--node-rank", "1"),
        ("--nproc-per-node", "2"),
        ("--master-addr", "j-0.j"),
        ("--master-port", "29500"),
        ("--rdzv-backend", "static"),
    ):
        assert argv[argv.index(flag) + 1] == value
    assert argv[-4:] == ["-m", "ddpjob_trainer.train", "--epochs", "1"]


def test_script_module_and_executable_targets(tmp_path):
    script = tmp_path / "t.py"
    script.write_text("")
    assert build_command(NODE, [str(script), "-x"])[0][-2:] == [str(script), "-x"]
    assert build_command(NODE, ["-m", "pkg.mod", "a"])[0][-3:] == ["-m", "pkg.mod", "a"]
    assert build_command(NODE, ["true"])[0][-2:] == ["--no-python", "true"]
    # One process per node and an arbitrary program: exec it as is, no torchrun.
    assert build_command(LaunchEnv(2, 1, 1, "a", 1, True), ["true", "x"]) == (["true", "x"], False)


def test_bad_targets():
    with pytest.raises(UsageError, match="does not exist"):
        build_command(NODE, ["missing.py"])
    with pytest.raises(UsageError, match="not found on PATH"):
        build_command(NODE, ["no-such-program-xyz"])


def test_wait_for_dns_gives_up_with_a_clear_error():
    start = time.monotonic()
    with pytest.raises(RendezvousTimeout, match="did not resolve within 1s"):
        wait_for_dns("nonexistent.invalid", timeout=1)
    assert time.monotonic() - start < 30  # bounded, not a hang


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if "error" in line.lower()]
    assert len(lines) == 1, stderr
    return lines[0]


def test_non_numeric_env_is_exit_2():
    r = launch(["ddpjob-train"], contract(NNODES="two", PET_NNODES="two"), timeout=60)
    assert r.returncode == 2
    assert "NNODES='two'" in _one_error_line(r.stderr)


def test_unresolvable_master_is_a_retryable_rendezvous_timeout():
    # Pod 0 not scheduled yet on a busy cluster: the ExitCode policy must retry, not fail.
    env = contract(MASTER_ADDR="nonexistent.invalid", PET_MASTER_ADDR="nonexistent.invalid")
    r = launch(["--dns-timeout", "2", "ddpjob-train"], env, timeout=60)
    assert r.returncode == EXIT_RENDEZVOUS_TIMEOUT == 142
    assert 128 <= r.returncode <= 255  # what the operator's ExitCode policy retries
    assert "did not resolve" in _one_error_line(r.stderr)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_torchrun_rendezvous_timeout_is_retryable(tmp_path):
    """Node 1 of 2 whose node 0 never comes: torchrun's static rendezvous gives up, exit 142."""
    script = tmp_path / "never.py"
    script.write_text("raise SystemExit('the worker must not start without its peers')\n")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "ddpjob_trainer._torchrun",
            "--nnodes",
            "2",
            "--node-rank",
            "1",
            "--nproc-per-node",
            "1",
            "--master-addr",
            "127.0.0.1",
            "--master-port",
            str(_free_port()),
            "--rdzv-backend",
            "static",
            "--rdzv-conf",
            "read_timeout=2,timeout=2",
            "--max-restarts",
            "0",
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=RUN,
    )
    assert r.returncode == EXIT_RENDEZVOUS_TIMEOUT, r.stderr[-2000:]
    assert "rendezvous failed before the gang was complete" in r.stderr


def test_one_process_per_node_execs_the_program_with_the_contract():
    r = launch(["sh", "-c", "echo rank=$RANK world=$WORLD_SIZE; exit 7"], contract(nnodes=2, node_rank=1, nproc=1))
    assert r.returncode == 7
    assert "rank=1 world=2" in r.stdout


def test_no_contract_defaults_to_one_node():
    r = launch(["sh", "-c", "echo ok"], clean_env())
    assert r.returncode == 0 and "single-node defaults" in r.stderr


@pytest.mark.slow
def test_sigterm_is_forwarded_to_workers_and_exit_code_kept(tmp_path):
    """SIGTERM to the launcher reaches every torchrun worker; the job exits 143."""
    script = tmp_path / "w.py"
    script.write_text(
        "import os, signal, sys, time, pathlib\n"
        "d = pathlib.Path(sys.argv[1])\n"
        "def bye(*_):\n"
        "    (d / ('term-' + os.environ['RANK'])).write_text('x'); sys.exit(143)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "(d / ('ready-' + os.environ['RANK'])).write_text('x')\n"
        "time.sleep(120)\n"
    )
    import subprocess

    proc = subprocess.Popen(
        [str(BIN / "ddpjob-launch"), str(script), str(tmp_path)],
        env=contract(nproc=2),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 90
    while not all((tmp_path / f"ready-{r}").exists() for r in (0, 1)):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()[0]
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=90)[0]
    assert proc.returncode == 143, out
    assert (tmp_path / "term-0").exists() and (tmp_path / "term-1").exists()


@pytest.mark.slow
def test_worker_exit_code_is_kept_through_torchrun(tmp_path):
    # Plain torchrun would exit 1; the operator must see the worker's own code.
    script = tmp_path / "fail.py"
    script.write_text("import os, sys; sys.exit(3 if os.environ['RANK'] == '1' else 0)\n")
    r = launch([str(script)], contract(nproc=2))
    assert r.returncode == 3, r.stderr[-2000:]


def test_cpus_come_from_the_cpuset_capped_by_the_cpu_limit():
    from ddpjob_trainer.env import available_cpus, threads_per_process

    everything = available_cpus(cpu_max="max 100000")
    assert everything >= 1
    assert available_cpus(cpu_max="150000 100000") == min(everything, 2)  # a 1.5-CPU limit
    assert available_cpus(cpu_max="100000 100000") == 1
    assert threads_per_process(4, cpus=32) == 8 and threads_per_process(8, cpus=4) == 1


@pytest.mark.slow
def test_workers_share_the_cpus_instead_of_torchruns_one_thread(tmp_path):
    from ddpjob_trainer.env import threads_per_process

    script = tmp_path / "threads.py"
    script.write_text(
        "import os, pathlib; pathlib.Path(os.environ['OUT'], os.environ['RANK']).write_text("
        "os.environ.get('OMP_NUM_THREADS', 'unset'))\n"
    )
    env = contract(nproc=2, OUT=str(tmp_path))
    env.pop("OMP_NUM_THREADS", None)
    r = launch([str(script)], env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert {p.read_text() for p in tmp_path.glob("[01]")} == {str(threads_per_process(2))}
    assert "Setting OMP_NUM_THREADS" not in r.stderr + r.stdout  # torchrun's own 1-thread default, not taken
    r = launch([str(script)], contract(nproc=2, OUT=str(tmp_path), OMP_NUM_THREADS="3"))
    assert {p.read_text() for p in tmp_path.glob("[01]")} == {"3"}  # an explicit value wins


@pytest.mark.slow
@pytest.mark.parametrize("ending", ["success", "worker-failure", "sigterm"])
def test_torchrun_leaves_nothing_in_tmpdir(tmp_path, ending):
    """torchrun alone makes $TMPDIR/torchelastic_* for its workers' error files and keeps it:
    one per launch. Through ddpjob-launch it is removed, however the launch ends."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = tmp_path / "w.py"
    script.write_text(
        "import os, pathlib, sys, time\n"
        "rank = os.environ['RANK']\n"
        f"pathlib.Path({str(tmp_path)!r}, 'ready-' + rank).write_text('x')\n"
        f"if {ending!r} == 'worker-failure': sys.exit(3 if rank == '1' else 0)\n"
        f"if {ending!r} == 'sigterm': time.sleep(120)\n"
    )
    proc = subprocess.Popen(
        [str(BIN / "ddpjob-launch"), str(script)],
        env=contract(nproc=2, TMPDIR=str(tmp)),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if ending == "sigterm":
        deadline = time.monotonic() + RUN
        while not all((tmp_path / f"ready-{r}").exists() for r in (0, 1)):
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()[0]
            time.sleep(0.2)
        assert list(tmp.iterdir()), "torchrun was given no log directory under TMPDIR while it ran"
        proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=RUN)[0]
    assert proc.returncode == {"success": 0, "worker-failure": 3, "sigterm": 143}[ending], out
    assert list(tmp.iterdir()) == [], out


@pytest.mark.slow
def test_a_launch_stopped_in_its_rendezvous_leaves_its_log_dir_to_the_next(tmp_path):
    """Stopped while it waits for a peer that never comes, torchrun dies by SIGTERM's default
    (its own handler comes with its workers) and its log directory stays: the next launch
    under the same TMPDIR removes it."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = tmp_path / "w.py"
    script.write_text("")
    env = contract(nnodes=2, node_rank=0, TMPDIR=str(tmp))
    proc = subprocess.Popen(
        [str(BIN / "ddpjob-launch"), str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    deadline = time.monotonic() + RUN
    while True:  # node 0's store answers: its launch waits in the rendezvous
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()[0]
        try:
            socket.create_connection(("127.0.0.1", int(env["MASTER_PORT"])), timeout=1).close()
            break
        except OSError:
            time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=RUN)[0]
    assert proc.returncode == 143, out
    left = [p.name for p in tmp.iterdir()]
    assert left and all(name.startswith("ddpjob-torchrun-") for name in left), (left, out)
    r = launch([str(script)], contract(nproc=2, TMPDIR=str(tmp)))
    assert r.returncode == 0, r.stderr
    assert list(tmp.iterdir()) == [], r.stderr


def test_only_the_log_dirs_of_ended_launches_are_removed(tmp_path):
    from ddpjob_trainer._torchrun import _remove_orphans

    child = subprocess.Popen(["true"])
    child.wait()  # reaped: its PID names no process (unless reused within this test)
    dead, alive = child.pid, os.getpid()
    for name in (f"ddpjob-torchrun-{dead}-ab1", f"ddpjob-torchrun-{alive}-cd2", "ddpjob-torchrun-x1y2", "other-1-2"):
        (tmp_path / name).mkdir()
    (tmp_path / f"ddpjob-torchrun-{dead}-file").write_text("not a directory")
    _remove_orphans(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"ddpjob-torchrun-{alive}-cd2", "ddpjob-torchrun-x1y2", "other-1-2", f"ddpjob-torchrun-{dead}-file"]
    )


def test_a_log_dir_the_user_names_is_theirs(tmp_path, monkeypatch):
    from ddpjob_trainer._torchrun import _own_log_dir

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.delenv("PET_LOG_DIR", raising=False)
    assert _own_log_dir(["--log-dir", "/logs", "x.py"]) is None
    assert _own_log_dir(["--log_dir=/logs", "x.py"]) is None
    monkeypatch.setenv("PET_LOG_DIR", "/logs")
    assert _own_log_dir(["x.py"]) is None
    monkeypatch.delenv("PET_LOG_DIR")
    import tempfile

    tempfile.tempdir = None  # TMPDIR is read once per process
    try:
        made = _own_log_dir(["x.py"])
    finally:
        tempfile.tempdir = None
    assert made is not None and made.startswith(str(tmp_path / "ddpjob-torchrun-"))
