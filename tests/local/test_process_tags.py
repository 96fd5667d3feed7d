"""A container's processes are found by the tag they inherit, including a process whose
environment cannot be read as the tag: one in the middle of execve (the kernel shows an
empty environ then), or one started with an empty environment on purpose."""

import os
import subprocess
import sys
import time

from ddpjob.local.process_tags import CONTAINER_TAG_ENV, kill_tagged, tagged_pids

PARENT = """
import subprocess, sys, time
# The child's env is empty, as a child reads for an instant while it execs.
subprocess.Popen(['sleep', '60'], env={})
open(sys.argv[1], 'w').close()
time.sleep(60)
"""


def test_a_child_with_no_readable_env_is_found_through_its_tagged_parent(tmp_path):
    tag = f"test-process-tags-{os.getpid()}-"
    ready = tmp_path / "ready"
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(ready)], env={**os.environ, CONTAINER_TAG_ENV: tag + "0"}
    )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert parent.poll() is None and time.monotonic() < deadline, "the parent did not start"
            time.sleep(0.05)
        found = tagged_pids(tag)
        assert parent.pid in found and len(found) == 2, found
        assert kill_tagged(tag) == 2
    finally:
        parent.kill()
        parent.wait(timeout=30)


def test_an_untagged_process_with_an_empty_env_is_not_found(tmp_path):
    lone = subprocess.Popen(["sleep", "60"], env={})
    try:
        assert lone.pid not in tagged_pids(f"test-process-tags-{os.getpid()}-")
        assert lone.pid not in tagged_pids("")  # every tag: still not a container's
    finally:
        lone.kill()
        lone.wait(timeout=30)
