"""A job's curves on the demo cluster (`make demo-cluster`, the real control plane in its
own network): a job with a checkpoint and `tensorboard: true` gets its TensorBoard Pod
running on a process kubelet, and `ddpjob tensorboard JOB`, run outside as a user runs it
with the printed kubeconfig, opens it: kubectl's port-forward cannot be upgraded (the
process kubelet serves none, docs/divergences.md K9), so the command goes through the
API server's service proxy, and the page and the scalars the job's rank 0 wrote come back
through the URL it prints."""

from __future__ import annotations

import json
import pathlib
import queue
import re
import signal
import subprocess
import sys
import textwrap
import threading
import urllib.request
from typing import Any

import pytest
import yaml

from ddpjob_devcluster.clusters.client import BIN, ROOT, wait_until
from tests.devcluster.demo.test_demo import DEMO
from tests.support.deadlines import CLUSTER_TEST, PHASE, REACTION

pytestmark = [pytest.mark.slow, pytest.mark.timeout(CLUSTER_TEST)]
pytest.importorskip("tensorboard")

# What rank 0 of ddpjob-train writes, through the trainer's own event file writer.
WRITE_CURVE = textwrap.dedent("""
    import os
    from ddpjob_trainer.event_files import EventWriter
    writer = EventWriter.open(os.environ['DDPJOB_CHECKPOINT_DIR'])
    writer.add({'event': 'position', 'step': 0})
    for step, loss in enumerate([2.0, 1.5, 1.25], 1):
        writer.add({'event': 'step', 'step': step, 'loss': loss})
    writer.close()
""")


def lines_of(stream: Any) -> queue.Queue[str | None]:
    """The stream's lines as they come, then None at its end."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


# Why the last fetch failed, for the wait's message (one test at a time per process).
last_failure: list[str] = [""]


def drain(lines: queue.Queue[str | None]) -> str:
    """What a stream said so far (all of it, once its process ended)."""
    said: list[str] = []
    while True:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            return "".join(said)
        if line is None:
            return "".join(said)
        said.append(line)


def waits_of(pid: int) -> list[str]:
    """Where each thread of a process waits in the kernel (its wchan), for a hang's report."""
    waits = []
    for task in sorted(pathlib.Path(f"/proc/{pid}/task").glob("*")):
        try:
            waits.append((task / "wchan").read_text() or "running")
        except OSError:
            continue
    return waits


def fetch(url: str) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=REACTION) as response:
            return response.read()
    except OSError as exc:
        last_failure[0] = f"{url}: {exc}"
        return None


def fetch_until(url: str, wanted: bytes) -> bytes:
    """The page once it holds `wanted`: one request on a loaded machine may come back with the
    API server's 503 or time out (its proxy and the Pod share the two cores with the suite)."""
    return wait_until(
        lambda: (got := fetch(url)) is not None and wanted in got and got,
        REACTION,
        f"no {wanted!r} at {url}",
        lambda: last_failure[0],
        interval=1.0,
    )


def test_ddpjob_tensorboard_opens_a_jobs_curves_on_the_demo_cluster(demo_env, tmp_path: pathlib.Path) -> None:
    demo = subprocess.Popen(
        [sys.executable, *DEMO, "--workdir", str(tmp_path / "demo")],
        env=demo_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )
    board: subprocess.Popen[str] | None = None
    try:
        said = lines_of(demo.stdout)
        seen: list[str] = []
        while not any("Ctrl-C stops everything" in line for line in seen):
            got = said.get(timeout=PHASE)
            assert got is not None, "".join(seen)
            seen.append(got)
        text = "".join(seen)
        if "network: the host's" in text:
            pytest.skip(
                "the demo could not make a network of its own: Pod IPs are loopback, which an "
                "EndpointSlice may not hold, so the service proxy has no endpoint"
            )
        export = re.search(r"export KUBECONFIG=(\S+)", text)
        assert export is not None, text
        kubeconfig = export.group(1)

        def kubectl(*args: str) -> str:
            got = subprocess.run(
                [str(BIN / "kubectl"), f"--kubeconfig={kubeconfig}", *args],
                capture_output=True,
                text=True,
                timeout=REACTION,
                cwd=ROOT,
            )
            assert got.returncode == 0, got.stderr
            return got.stdout

        kubectl("apply", "-f", "manifests/examples/ckpt-claim.yaml")
        job = tmp_path / "board.yaml"
        job.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "ddpjob.io/v1alpha1",
                    "kind": "DDPJob",
                    "metadata": {"name": "board"},
                    "spec": {
                        "image": "ddpjob/trainer:0.2.0-cpu",
                        "command": [sys.executable, "-c", WRITE_CURVE],
                        "tensorboard": True,
                        "checkpoint": {"claimName": "ckpt"},
                    },
                }
            )
        )
        kubectl("apply", "-f", str(job))
        wait_until(
            lambda: kubectl("get", "ddpj", "board", "-o", "jsonpath={.status.tensorboard.service}"),
            PHASE,
            "no status.tensorboard",
            lambda: kubectl("describe", "ddpj", "board"),
        )

        # The command a user runs, outside the demo's network, with the printed kubeconfig.
        board = subprocess.Popen(
            [sys.executable, "-m", "ddpjob.cli", "tensorboard", "board", "--kubeconfig", kubeconfig],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env=demo_env,
        )
        printed, complaints = lines_of(board.stdout), lines_of(board.stderr)  # both drained: a full pipe blocks it
        line = printed.get(timeout=PHASE)
        if line is None:
            pytest.fail(f"ddpjob tensorboard ended (exit {board.wait(REACTION)}): {drain(complaints)}")
        url = re.fullmatch(r"TensorBoard of ddpjob board: (http://127\.0\.0\.1:\d+/)  \(Ctrl-C to stop\)\n", line)
        assert url, line
        # TensorBoard's page (text/html: what the API server's proxy rewrites) and the script
        # it loads, by the relative link it gives.
        page = fetch_until(url.group(1), b"<tb-webapp></tb-webapp>")
        script = re.search(rb'<script src="(index\.js[^"]*)"', page)
        assert script and len(fetch_until(url.group(1) + script.group(1).decode(), b"")) > 100_000, page[-300:]

        # The scalars rank 0 wrote, read by TensorBoard in its Pod from the job's checkpoint
        # volume, through the API server's proxy and the command's port.
        def tags() -> Any:
            got = fetch(url.group(1) + "data/plugin/scalars/tags")
            return got is not None and "train/loss" in json.loads(got).get("board", {}) and got  # the job's run

        wait_until(
            tags,
            REACTION,
            "TensorBoard did not show the job's train/loss",
            lambda: kubectl("logs", "-l", "ddpjob.io/tensorboard-for=board", "--tail=20"),
        )
        points = json.loads(fetch_until(url.group(1) + "data/plugin/scalars/scalars?run=board&tag=train/loss", b"["))
        assert [(p[1], p[2]) for p in points] == [(1, 2.0), (2, 1.5), (3, 1.25)]

        board.send_signal(signal.SIGINT)
        try:
            assert board.wait(REACTION) == 130
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"ddpjob tensorboard did not end on Ctrl-C; its threads wait in {waits_of(board.pid)}; "
                f"it said: {drain(complaints)}"
            )
        err = drain(complaints)
        assert "error upgrading connection" in err and "through the API server's service proxy instead" in err, err

        demo.send_signal(signal.SIGINT)
        assert demo.wait(60) == 0
    finally:
        # Ctrl-C first, as a person stops them: a killed demo could not stop its cluster, and
        # the fixture would report those leftovers over this test's own failure.
        for proc in (board, demo):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
