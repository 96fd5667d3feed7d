"""The lock file shared by `ddpjob run` and the demo cluster: one holder, named in the refusal."""

import os
import subprocess
import sys

import pytest

from ddpjob.local import pidlock


def test_a_second_holder_is_refused_with_the_first_ones_pid(tmp_path):
    path = tmp_path / "deep" / "run.lock"
    held = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; "
            "from ddpjob.local import pidlock; f = pidlock.acquire(Path(sys.argv[1])); "
            "print('held', flush=True); time.sleep(60)",
            str(path),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    try:
        assert held.stdout.readline().strip() == "held"
        with pytest.raises(pidlock.LockHeld) as refused:
            pidlock.acquire(path)
        assert refused.value.holder == str(held.pid) and refused.value.path == path
    finally:
        held.kill()
        held.wait()
    # The kernel dropped the lock with the process: it can be taken now, and names us.
    f = pidlock.acquire(path)
    assert path.read_text() == str(os.getpid())
    pidlock.release(f)
