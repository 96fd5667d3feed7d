"""The process kubelet on its own (no operator, no torch): Pods rendered by `ddpjob.render`
and created through the API run as processes with the Pod's env, resolved for this
machine; phases and exit codes go back through pods/status; deletion and container
exit stop the whole process tree."""

from __future__ import annotations

import json
import pathlib
import signal
import sys
import textwrap
from typing import Any

import kubernetes
import pytest

from ddpjob import render
from ddpjob.api import spec
from ddpjob.local.container import Terminated
from ddpjob_devcluster.clusters.client import wait_until
from ddpjob_devcluster.kubelet.kubelet import ProcessKubelet
from ddpjob_devcluster.kubelet.status import Container
from tests.devcluster.kubelet.conftest import KubeletNode
from tests.support.deadlines import REACTION, TEST

pytestmark = pytest.mark.timeout(TEST)

NS = "ml"  # the namespace of the tests that build a kubelet's state by hand


def job(script: str, namespace: str, **extra: Any) -> spec.DDPJob:
    """A DDPJob whose trainer container runs a Python script (no torch needed)."""
    return spec.parse_job(
        {
            "apiVersion": "ddpjob.io/v1alpha1",
            "kind": "DDPJob",
            "metadata": {"name": "probe", "namespace": namespace, "uid": "u-1", "generation": 1},
            "spec": {
                "nodes": 2,
                "nprocPerNode": 1,
                "image": "none",
                "command": [sys.executable, "-c", textwrap.dedent(script)],
                **extra,
            },
        }
    )


def create_pods(
    node: KubeletNode, ddpjob: spec.DDPJob, restart_count: int = 0, ranks: tuple[int, ...] = (0, 1)
) -> None:
    for rank in ranks:
        pod = render.render_pod(ddpjob, rank, restart_count)
        pod["metadata"].pop("ownerReferences")  # no DDPJob object in this test
        node.create_pod(pod)


def terminated(status: dict[str, Any]) -> dict[str, Any]:
    return status["containerStatuses"][0]["state"]["terminated"]


DUMP_ENV = """
    import json, os, sys
    keys = ['MASTER_ADDR', 'PET_MASTER_ADDR', 'MASTER_PORT', 'PET_MASTER_PORT', 'NODE_RANK',
            'DDPJOB_CHECKPOINT_DIR', 'DDPJOB_RESTART_COUNT', 'DDPJOB_PROGRESS_FILE', 'DDPJOB_PROGRESS_HOST']
    json.dump({k: os.environ.get(k) for k in keys} | {'cwd': os.getcwd()}, open('env.json', 'w'))
    sys.exit(int(os.environ['NODE_RANK']) * 3)
"""


def test_pods_run_with_their_env_resolved_for_this_machine(node: KubeletNode) -> None:
    ddpjob = job(DUMP_ENV, node.ns, checkpoint={"claimName": "data"})
    create_pods(node, ddpjob)

    ok, failed = node.wait_phase("probe-0", "Succeeded"), node.wait_phase("probe-1", "Failed")
    assert terminated(ok)["exitCode"] == 0 and terminated(ok)["reason"] == "Completed"
    assert terminated(failed)["exitCode"] == 3 and terminated(failed)["reason"] == "Error"
    assert failed["containerStatuses"][0]["name"] == "trainer"
    # An IP of its own per Pod (a loopback address here), as a CNI plugin gives.
    assert ok["podIP"] != failed["podIP"] and ok["podIP"].startswith("127.")

    envs = [json.loads((node.pod_dir(f"probe-{r}") / "env.json").read_text()) for r in (0, 1)]
    for rank, env in enumerate(envs):
        assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == "127.0.0.1"  # not probe-0.probe.ml.svc
        assert env["MASTER_PORT"] == env["PET_MASTER_PORT"] != "29500"
        assert env["NODE_RANK"] == str(rank) and env["DDPJOB_RESTART_COUNT"] == "0"
        assert env["DDPJOB_CHECKPOINT_DIR"] == str(node.kubelet.checkpoint_dir("probe", node.ns))  # not /checkpoints
        assert env["DDPJOB_PROGRESS_FILE"] == str(pathlib.Path(env["cwd"]) / "progress.json")  # not /run/ddpjob
    assert [e["DDPJOB_PROGRESS_HOST"] for e in envs] == [ok["podIP"], failed["podIP"]]  # the launcher binds it
    assert envs[0]["MASTER_PORT"] == envs[1]["MASTER_PORT"]  # one rendezvous per attempt
    assert envs[0]["cwd"] != envs[1]["cwd"]  # a directory of its own per Pod


def test_each_attempt_of_a_job_gets_its_own_port(node: KubeletNode) -> None:
    ddpjob = job(DUMP_ENV, node.ns)
    create_pods(node, ddpjob, restart_count=0, ranks=(0,))
    node.wait_phase("probe-0", "Succeeded")
    node.core.delete_namespaced_pod("probe-0", node.ns)
    create_pods(node, ddpjob, restart_count=1, ranks=(0,))
    wait_until(lambda: len(node.kubelet.ports) == 2, REACTION, "the second attempt did not start")
    assert node.kubelet.ports[(node.ns, "probe", 0)] != node.kubelet.ports[(node.ns, "probe", 1)]


STUBBORN = """
    import os, signal, subprocess, sys, time
    # A grandchild in a session of its own, as torchrun's workers are: a process-group
    # kill would miss it.
    subprocess.Popen([sys.executable, '-c', 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); '
                      'time.sleep(120)'], start_new_session=True)
    def on_term(*_):
        open('got-sigterm', 'w').close()
    signal.signal(signal.SIGTERM, on_term)  # and it does not stop on SIGTERM either
    open('ready', 'w').close()
    time.sleep(120)
"""


def test_a_deleted_pod_gets_sigterm_then_its_whole_tree_is_killed(node: KubeletNode) -> None:
    create_pods(node, job(STUBBORN, node.ns), ranks=(0,))
    container = wait_until(lambda: node.kubelet.container("probe-0", node.ns), REACTION, "the Pod did not start")
    workdir = container.log_path.parent
    wait_until(lambda: (workdir / "ready").exists(), REACTION, "the script did not start")
    assert len(node.kubelet.live_processes()) == 2

    node.core.delete_namespaced_pod("probe-0", node.ns)

    wait_until(lambda: (workdir / "got-sigterm").exists(), REACTION, "no SIGTERM on deletion")
    wait_until(
        lambda: container.exit_code is not None and not node.kubelet.live_processes(),
        REACTION,
        "the container was not killed after its grace",
    )
    assert container.exit_code == 128 + signal.SIGKILL
    # The kubelet confirms the deletion (grace 0) once the container has stopped.
    wait_until(lambda: node.pod("probe-0") is None, REACTION, "the deleted Pod was not confirmed gone")


def test_when_the_main_process_ends_the_container_ends(node: KubeletNode) -> None:
    create_pods(
        node,
        job(
            """
        import subprocess, sys
        subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], start_new_session=True)
    """,
            node.ns,
        ),
        ranks=(0,),
    )
    node.wait_phase("probe-0", "Succeeded")
    wait_until(lambda: not node.kubelet.live_processes(), REACTION, "a process outlived its container")


def test_a_command_that_cannot_start_fails_the_pod(node: KubeletNode) -> None:
    ddpjob = job("", node.ns)
    pod = render.render_pod(ddpjob, 0, 0)
    pod["metadata"].pop("ownerReferences")
    pod["spec"]["containers"][0]["command"] = ["no-such-program-here"]
    node.create_pod(pod)
    status = node.wait_phase("probe-0", "Failed")
    assert terminated(status)["exitCode"] == 128 and terminated(status)["reason"] == "StartError"
    assert "no-such-program-here" in terminated(status)["message"]


def test_a_failed_container_s_last_log_lines_are_its_termination_message(node: KubeletNode) -> None:
    # terminationMessagePolicy FallbackToLogsOnError (the rendered trainer's): the kubelet's
    # last 80 lines (2 KiB at most) of a container that failed; none for one that succeeded.
    create_pods(
        node,
        job(
            """
        import os, sys
        for i in range(100):
            print(f'line {i}')
        print('error: no CUDA device', file=sys.stderr)
        sys.exit(0 if os.environ['NODE_RANK'] == '1' else 2)
    """,
            node.ns,
        ),
    )
    failed = terminated(node.wait_phase("probe-0", "Failed"))
    lines = failed["message"].splitlines()
    assert failed["exitCode"] == 2 and lines[-1] == "error: no CUDA device" and len(lines) == 80
    assert lines[0] == "line 21" and len(failed["message"].encode()) <= 2048
    assert "message" not in terminated(node.wait_phase("probe-1", "Succeeded"))


def test_the_readme_progress_recipe_without_the_package_works_in_a_pod(node: KubeletNode) -> None:
    # The record's directory exists before the container starts, as a Pod's emptyDir does.
    recipe = pathlib.Path(__file__).resolve().parents[2] / "local" / "scripts" / "progress_by_hand.py"
    create_pods(
        node, job(recipe.read_text(), node.ns, env=[{"name": "DDPJOB_TEST_PROGRESS_LINGER", "value": "0"}]), ranks=(0,)
    )
    node.wait_phase("probe-0", "Succeeded")
    log_dir = node.pod_dir("probe-0")
    assert json.loads((log_dir / "progress.json").read_text())["step"] == 48


class FlakyStatusAPI:
    """pods/status and delete, recorded; the first `fail` status writes answer 500."""

    def __init__(self, fail: int) -> None:
        self.fail = fail
        self.calls: list[tuple[str, Any]] = []

    def patch_namespaced_pod_status(self, name: str, namespace: str, body: dict, **_: Any) -> None:
        self.calls.append(("status", body["status"]["phase"]))
        if self.fail > 0:
            self.fail -= 1
            raise kubernetes.client.ApiException(status=500, reason="injected")

    def delete_namespaced_pod(
        self, name: str, namespace: str, body: kubernetes.client.V1DeleteOptions, **_: Any
    ) -> None:
        self.calls.append(("delete", body.grace_period_seconds))


class ExitedProcess:
    """A container's main process that ended with SIGTERM's 143."""

    _reader = None

    def poll(self) -> int:
        return 143

    def terminated(self) -> Terminated:
        return Terminated(143, "Error", 1.0, None)


@pytest.mark.parametrize("fail", [0, 2])
def test_a_deleted_pod_held_by_a_finalizer_gets_its_terminal_status_before_the_grace_0_delete(tmp_path, fail):
    """Kueue's finalizer keeps a stopped Pod until it is seen to end: the kubelet writes the
    terminal phase, retrying a failed write, and confirms the deletion only after it (as the
    status manager syncs a terminal status before it deletes). Before, a failed write was
    dropped once the Pod was being deleted and the grace-0 delete left it `Running` forever."""
    kubelet = ProcessKubelet("http://127.0.0.1:1", tmp_path)
    c = Container(
        namespace=NS,
        pod="victim-0",
        uid="u-0",
        job="victim",
        attempt=0,
        tag="t",
        log_path=tmp_path / "log",
        proc=ExitedProcess(),
        times={"seen": 0.0},
    )
    kubelet.containers[c.uid] = c
    api = FlakyStatusAPI(fail)
    c.confirm_deletion, c.deleted = True, True  # what a graceful deletion's event sets (_on_pod)
    for _ in range(fail + 2):
        kubelet._tick(api)
    assert api.calls == [("status", "Failed")] * (fail + 1) + [("delete", 0)]


def test_a_deletion_seen_after_the_container_exited_still_writes_its_terminal_status_first(tmp_path):
    """Kueue stops a Pod with two events (TerminationTarget, then the deletion): the kubelet
    drains both before its next tick, by when SIGTERM has already ended the container."""
    kubelet = ProcessKubelet("http://127.0.0.1:1", tmp_path)
    c = Container(
        namespace=NS,
        pod="victim-0",
        uid="u-0",
        job="victim",
        attempt=0,
        tag="t",
        log_path=tmp_path / "log",
        proc=ExitedProcess(),
        times={"seen": 0.0},
    )
    kubelet.containers[c.uid] = c
    api = FlakyStatusAPI(0)
    deleting = {
        "metadata": {
            "uid": "u-0",
            "name": "victim-0",
            "namespace": NS,
            "deletionTimestamp": "2026-01-01T00:00:00Z",
            "deletionGracePeriodSeconds": 30,
        }
    }
    kubelet._on_pod(api, deleting)
    kubelet._on_pod(api, deleting)
    kubelet._tick(api)
    assert api.calls == [("status", "Failed"), ("delete", 0)]
