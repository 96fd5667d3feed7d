"""hack/kind/builds.sh (make kind-builds): the node image's build and the images' run side by
side, and a failure of either fails it, says which, and stops the other. Run on a copy of
the script beside stubs of the two builds it starts."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import time

from tests.deploy.deploy_helpers import ROOT

SCRIPT = ROOT / "hack" / "kind" / "builds.sh"


def tree(tmp_path: pathlib.Path, node: str, images: str) -> pathlib.Path:
    """A checkout with builds.sh and the two builds it starts replaced by `node` and `images`."""
    (tmp_path / "hack" / "kind").mkdir(parents=True)
    shutil.copy(SCRIPT, tmp_path / "hack" / "kind" / "builds.sh")
    for name, body in (("kind-node-image.sh", node), ("build-images.sh", images)):
        path = tmp_path / "hack" / name
        path.write_text(f"#!/usr/bin/env bash\n{body}\n")
        path.chmod(0o755)
    return tmp_path / "hack" / "kind" / "builds.sh"


def run(script: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(script)], capture_output=True, text=True, timeout=60, env=dict(os.environ))


def test_the_node_image_builds_while_the_images_do(tmp_path: pathlib.Path) -> None:
    """The node's build ends only once the images' build has started: one after the other
    (images last) it would wait out its 10 s and fail."""
    started = tmp_path / "images-started"
    script = tree(
        tmp_path,
        node=f"for i in $(seq 100); do [[ -e {started} ]] && {{ echo node-image; exit 0; }}; sleep 0.1; done; exit 9",
        images=f"touch {started}; echo 'images: ddpjob/trainer:x-cpu: 3 s, 2.9G'",
    )
    done = run(script)
    assert done.returncode == 0, done.stderr
    assert "images: ddpjob/trainer:x-cpu: 3 s, 2.9G" in done.stderr and "both built in" in done.stderr


def test_a_node_image_that_fails_fails_it_and_stops_the_images_build(tmp_path: pathlib.Path) -> None:
    marker = tmp_path / "images-pid"
    script = tree(tmp_path, node="sleep 0.5; exit 5", images=f"echo $$ >{marker}; sleep 60")
    began = time.monotonic()
    done = run(script)
    assert done.returncode == 5, done.stderr
    assert "the node image failed (exit 5); stopping the images' build" in done.stderr
    pid = int(marker.read_text())
    assert not _alive(pid), f"the images' build (pid {pid}) outlived the failure"
    assert time.monotonic() - began < 30  # it did not wait out the images' 60 s


def test_images_that_fail_fail_it_with_the_tail_of_their_log(tmp_path: pathlib.Path) -> None:
    script = tree(tmp_path, node="echo node-image", images="echo 'pip: no matching distribution for torch'; exit 3")
    done = run(script)
    assert done.returncode == 3, done.stderr
    assert "pip: no matching distribution for torch" in done.stderr
    assert "kind-builds: the images failed (exit 3)" in done.stderr


def _alive(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        status = pathlib.Path(f"/proc/{pid}/stat")
        if status.exists() and status.read_text().split(") ", 1)[1].startswith("Z"):
            return False  # a zombie its new parent has yet to reap
        time.sleep(0.1)
    return True
