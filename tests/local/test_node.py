"""The one local node executor of `ddpjob run` and the dev cluster's kubelet (ddpjob/local/node.py)."""

from __future__ import annotations

import io
import json
import sys
import time
import uuid
from pathlib import Path

import pytest

from ddpjob import contract
from ddpjob.local.node import LocalNode

pytestmark = pytest.mark.timeout(120)

# Writes its env, starts a grandchild in a session of its own (as torchrun does), and
# ignores SIGTERM: only the grace's SIGKILL and the tag sweep end them.
STUBBORN = """
import json, os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                          "time.sleep(600)"], start_new_session=True)
with open(sys.argv[1], "w") as f:
    json.dump({"env": dict(os.environ), "child": child.pid}, f)
time.sleep(600)
"""


def pod(*command: str) -> dict:
    return {
        "metadata": {"name": "j-0", "namespace": "ns"},
        "spec": {"containers": [{"name": "trainer", "command": list(command)}]},
    }


def wait_for_file(path: Path, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().endswith("}"):
            return json.loads(path.read_text())
        time.sleep(0.02)
    raise AssertionError(f"{path} was not written within {timeout}s")


def test_each_attempt_has_a_port_of_its_own_and_keeps_it() -> None:
    node = LocalNode(f"test-{uuid.uuid4().hex[:8]}/")
    first, second = node.port_for(("ns", "j", 0)), node.port_for(("ns", "j", 1))
    assert first != second and node.port_for(("ns", "j", 0)) == first
    assert node.ports == {("ns", "j", 0): first, ("ns", "j", 1): second}


def test_a_pod_gets_the_local_overrides_and_a_loopback_ip_then_stops_whole(tmp_path: Path) -> None:
    node = LocalNode(f"test-{uuid.uuid4().hex[:8]}/", stop_grace=0.5)
    report = tmp_path / "env.json"
    started = node.start(
        pod(sys.executable, "-c", STUBBORN, str(report)),
        port=29999,
        checkpoint_dir=str(tmp_path / "ckpt"),
        progress_file=str(tmp_path / "progress.json"),
        out=io.StringIO(),
        extra_env={"EXTRA": "1"},
    )
    seen = wait_for_file(report)
    env = seen["env"]
    assert started.ip.startswith("127.") and env[contract.PROGRESS_HOST] == started.ip
    assert (env[contract.MASTER_ADDR], env[contract.MASTER_PORT]) == ("127.0.0.1", "29999")
    assert env[contract.CHECKPOINT_DIR] == str(tmp_path / "ckpt") and env["EXTRA"] == "1"
    assert started.proc.tag.startswith(node.tag_prefix)
    assert set(node.live_pids()) >= {started.proc.popen.pid, seen["child"]}
    node.stop_all([started.proc])  # SIGTERM is ignored: SIGKILL after the grace, the whole tree
    end = started.proc.terminated()
    assert end is not None and end.exit_code == 137
    deadline = time.monotonic() + 10  # SIGKILL is delivered at once, the exit a moment later
    while node.live_pids() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert node.live_pids() == [] and node.sweep() == 0


@pytest.mark.parametrize(
    "code, left, policy, expected",
    [
        (0, '{"step": 9}', None, '{"step": 9}'),  # whatever the exit code: the file is the message
        (3, "bad input", "FallbackToLogsOnError", "bad input"),  # the file first, as the kubelet reads it
        (3, "", "FallbackToLogsOnError", "last words"),  # empty and failed: the log's tail
        (0, "", "FallbackToLogsOnError", None),  # empty and succeeded: no message
    ],
)
def test_the_termination_log_is_the_containers_message_as_the_kubelet_reads_it(
    tmp_path: Path, code: int, left: str, policy: str | None, expected: str | None
) -> None:
    node = LocalNode(f"test-{uuid.uuid4().hex[:8]}/")
    script = (
        f"import os, sys; print('last words', flush=True); "
        f"open(os.environ['{contract.TERMINATION_LOG}'], 'w').write({left!r}); sys.exit({code})"
    )
    spec = pod(sys.executable, "-c", script)
    if policy:
        spec["spec"]["containers"][0]["terminationMessagePolicy"] = policy
    started = node.start(
        spec, port=29998, checkpoint_dir=None, progress_file=str(tmp_path / "pod" / "progress.json"), out=io.StringIO()
    )
    started.proc.wait(60)
    end = started.proc.terminated()
    assert end is not None and end.exit_code == code and end.message == expected
    # The file is the Pod's own, beside its progress file, and made before the container started.
    assert (tmp_path / "pod" / "termination-log").read_text() == left
