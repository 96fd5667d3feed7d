"""The cluster workflow a user follows, against the development cluster (the real control
plane, the operator installed from the chart, process kubelets): `ddpjob submit --wait`, `logs`, `describe`,
`get`, `wait`, and the same job seen through kubectl (`get` table, `describe` Events,
`logs`)."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
from typing import Any

import pytest
import yaml

from ddpjob_devcluster.clusters.real import RealCluster
from tests.support.deadlines import CLUSTER_TEST, PHASE, REACTION

pytestmark = [pytest.mark.slow, pytest.mark.timeout(CLUSTER_TEST)]

SCRIPT = (
    "import os, sys; r = int(os.environ['NODE_RANK']); "
    "print(f'hello from node {r} of {os.environ[\"NNODES\"]}', flush=True); "
    "sys.exit(int(os.environ.get('EXIT_CODE', '0')) if r == 1 else 0)"
)


def job(name: str, exit_code: int = 0, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {"name": name},
        "spec": {
            "nodes": 2,
            "nprocPerNode": 1,
            "image": "ddpjob/trainer:test",
            "command": [sys.executable, "-c", SCRIPT],
            "env": [{"name": "EXIT_CODE", "value": str(exit_code)}],
            "restartBackoffSeconds": 0,
            **spec,
        },
    }


def ddpjob(cluster: RealCluster, *args: str, timeout: float = REACTION) -> subprocess.CompletedProcess:
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    return subprocess.run(
        [sys.executable, "-m", "ddpjob.cli", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def write(tmp_path: pathlib.Path, body: dict[str, Any]) -> str:
    path = tmp_path / f"{body['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(body))
    return str(path)


def test_submit_wait_logs_describe_and_kubectl(cluster: RealCluster, tmp_path: pathlib.Path) -> None:
    done = ddpjob(
        cluster, "submit", write(tmp_path, job("hello")), "--wait", f"--timeout={PHASE:.0f}s", timeout=PHASE + 30
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "ddpjob.ddpjob.io/hello" and lines[-1].startswith("hello: Succeeded"), lines

    logs = ddpjob(cluster, "logs", "hello", "--all")
    assert logs.returncode == 0, logs.stderr
    assert sorted(logs.stdout.splitlines()) == ["[hello-0] hello from node 0 of 2", "[hello-1] hello from node 1 of 2"]
    one = ddpjob(cluster, "logs", "hello", "--rank", "1")
    assert one.stdout.splitlines() == ["[hello-1] hello from node 1 of 2"], one.stderr
    follow = ddpjob(cluster, "logs", "hello", "-f")  # a finished container: the stream ends
    assert follow.stdout.splitlines() == ["[hello-0] hello from node 0 of 2"], follow.stderr

    described = ddpjob(cluster, "describe", "hello")
    assert described.returncode == 0, described.stderr
    text = described.stdout
    assert re.search(r"^  phase:\s+Succeeded$", text, re.M) and "Events:  <none>" not in text
    assert "Created" in text and "hello-1" in text and "exit code 0" in text

    table = ddpjob(cluster, "get")
    header, row = table.stdout.splitlines()
    assert header.split()[:5] == ["NAME", "NODES", "PROCS", "PHASE", "RESTARTS"]
    assert row.split()[:5] == ["hello", "2/2", "1", "Succeeded", "0"]
    # The job has ended: either wait answers at once, whatever its timeout.
    assert ddpjob(cluster, "wait", "hello", "--for=Succeeded", f"--timeout={REACTION:.0f}s").returncode == 0
    assert ddpjob(cluster, "wait", "hello", "--for=Running", f"--timeout={REACTION:.0f}s").returncode == 1

    # The same through kubectl: the server's table, Events in describe, container logs.
    got = cluster.kubectl("get", "ddpj").stdout.splitlines()
    assert got[0].split()[:5] == ["NAME", "NODES", "PROCS", "PHASE", "RESTARTS"]
    assert got[1].split()[:5] == ["hello", "2/2", "1", "Succeeded", "0"]
    kdescribe = cluster.kubectl("describe", "ddpj", "hello").stdout
    events = kdescribe[kdescribe.index("Events:") :]
    assert "<none>" not in events.splitlines()[0] and "Succeeded" in events, events
    assert cluster.kubectl("logs", "hello-1").stdout == "hello from node 1 of 2\n"


def test_submit_wait_reports_a_failure_and_describe_shows_it(cluster: RealCluster, tmp_path: pathlib.Path) -> None:
    done = ddpjob(
        cluster,
        "submit",
        write(tmp_path, job("broken", exit_code=3, restartPolicy="ExitCode")),
        "--wait",
        f"--timeout={PHASE:.0f}s",
        timeout=PHASE + 30,
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout.splitlines()[-1].startswith("broken: Failed"), done.stdout
    text = ddpjob(cluster, "describe", "broken").stdout
    failure = text[text.index("Last Failure:") : text.index("Conditions:")]
    assert re.search(r"^  pod:\s+broken-1$", failure, re.M) and re.search(r"^  exitCode:\s+3$", failure, re.M), failure
