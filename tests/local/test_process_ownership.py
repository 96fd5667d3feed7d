"""`ddpjob run` owns its processes: none survive the runner (SIGKILL, SIGHUP, SIGTERM),
even those that started a session of their own, and one job directory runs one job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ddpjob_devcluster.clusters.operator_runner import wait_for

pytestmark = pytest.mark.timeout(120)

# A "trainer" that starts a grandchild in a session of its own (as torchrun does with
# its workers), writes both pids, and waits forever.
SCRIPT = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
with open(os.path.join(os.environ["DDPJOB_TEST_PID_DIR"], os.environ["NODE_RANK"] + ".pids"), "w") as f:
    f.write(f"{os.getpid()} {child.pid}")
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"  # a zombie is dead, only unreaped
    except OSError:
        return False


def _start(tmp_path: Path, name: str = "own", workdir: Path | None = None):
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir(exist_ok=True)
    for old in pid_dir.glob("*.pids"):
        old.unlink()
    body = {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {"name": name},
        "spec": {
            "nodes": 2,
            "nprocPerNode": 1,
            "image": "local",
            "command": [sys.executable, "-c", SCRIPT],
            "env": [{"name": "DDPJOB_TEST_PID_DIR", "value": str(pid_dir)}],
        },
    }
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(body))
    args = [sys.executable, "-m", "ddpjob.cli", "run", str(job)] + (["--workdir", str(workdir)] if workdir else [])
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    files = wait_for(
        lambda: (f := sorted(pid_dir.glob("*.pids"))) and len(f) == 2 and all(p.read_text() for p in f) and f,
        timeout=60,
        message="the workers did not start",
    )
    pids = [int(x) for f in files for x in f.read_text().split()]
    assert len(pids) == 4 and all(_alive(p) for p in pids)
    return proc, pids


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP, signal.SIGTERM])
def test_no_process_survives_the_runner(tmp_path: Path, sig: int) -> None:
    proc, pids = _start(tmp_path)
    proc.send_signal(sig)
    proc.wait(60)
    try:
        wait_for(
            lambda: not any(_alive(p) for p in pids),
            timeout=30,
            message=f"survivors after {signal.Signals(sig).name}: {[p for p in pids if _alive(p)]}",
        )
    finally:
        for p in pids:
            if _alive(p):
                os.kill(p, signal.SIGKILL)
    if sig != signal.SIGKILL:
        assert proc.returncode == 130  # interrupted: every process stopped in order


def test_a_second_run_of_the_same_job_is_refused(tmp_path: Path) -> None:
    first, pids = _start(tmp_path)
    try:
        second = subprocess.run(
            [sys.executable, "-m", "ddpjob.cli", "run", str(tmp_path / "job.yaml")],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 1
        assert f"job 'own' is already running here (pid {first.pid}" in second.stdout + second.stderr
        assert first.poll() is None and all(_alive(p) for p in pids)  # the first run is untouched
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(60)
    # Once it ended, the job may run again (the lock went with it).
    again, pids = _start(tmp_path)
    again.send_signal(signal.SIGTERM)
    assert again.wait(60) == 130


# A parent that starts a child with one of ownership's pre-exec hooks, says the child's
# pid once it is ready, and exits: the child gets the hook's signal from the kernel.
PARENT = """
import subprocess, sys
from ddpjob.local import ownership
child = subprocess.Popen([sys.executable, "-c", sys.argv[2]], preexec_fn=getattr(ownership, sys.argv[1]),
                         stdout=subprocess.PIPE)
child.stdout.readline()  # its handler is in place
print(child.pid, flush=True)
"""
CHILD = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: (open(sys.argv[0] + ".term", "w").close(), sys.exit(0)))
print("ready", flush=True)
time.sleep(600)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("hook, signalled", [("die_with_parent", False), ("stop_with_parent", True)])
def test_a_child_dies_with_its_parent(tmp_path: Path, hook: str, signalled: bool) -> None:
    """die_with_parent kills outright (ddpjob run's containers); stop_with_parent sends
    SIGTERM (the control plane's servers clean up)."""
    marker = tmp_path / "child"
    child = CHILD.replace("sys.argv[0]", repr(str(marker)))
    done = subprocess.run([sys.executable, "-c", PARENT, hook, child], capture_output=True, text=True, timeout=60)
    pid = int(done.stdout.split()[0])
    wait_for(lambda: not _alive(pid), timeout=30, message=f"the child of {hook} outlived its parent")
    assert (tmp_path / "child.term").exists() == signalled
