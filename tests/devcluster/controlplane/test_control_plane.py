"""The real control plane's parts on their own: building from pinned modules (and every
way that can fail, in one line), a component that cannot start, a port in use, nodes
registering with GPU capacity and going away, and nothing left running after stop."""

from __future__ import annotations

import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import kubernetes
import pytest

from ddpjob_devcluster.clusters.client import wait_until
from ddpjob_devcluster.controlplane import build, flags, go_module
from ddpjob_devcluster.controlplane.node import NodeAgent, NodeShape
from ddpjob_devcluster.controlplane.process import Component, StartFailure
from tests.support.deadlines import CLUSTER_TEST, PHASE, REACTION

pytestmark = pytest.mark.timeout(CLUSTER_TEST)


def module(root: pathlib.Path, name: str, main_go: str) -> go_module.Component:
    """A Go module of one local command: building it needs no network."""
    folder = root / name
    (folder / "cmd" / "hello").mkdir(parents=True)
    (folder / "go.mod").write_text(
        f"module example.test/{name}\n\ngo 1.26.0\n\ntool example.test/{name}/cmd/hello\n\n"
        f"require example.test/pinned v1.2.3\n\nreplace example.test/pinned => ./pinned\n"
    )
    (folder / "go.sum").write_text("")
    (folder / "pinned").mkdir()
    (folder / "pinned" / "go.mod").write_text("module example.test/pinned\n\ngo 1.26.0\n")
    (folder / "cmd" / "hello" / "main.go").write_text(main_go)
    return go_module.Component(name, "example.test/pinned", modules=root)


def test_the_command_lines_name_gates_sorted_and_a_scheduler_config_only_when_given(tmp_path) -> None:
    assert flags.feature_gates({}) == []
    assert flags.feature_gates({"Zeta": False, "Alpha": True}) == ["--feature-gates=Alpha=true,Zeta=false"]
    plain = flags.scheduler(tmp_path, kubeconfig=tmp_path / "k", verbosity=2, gates={})
    assert plain[0] == str(tmp_path / "kube-scheduler") and not any(a.startswith("--config") for a in plain)
    configured = flags.scheduler(
        tmp_path, kubeconfig=tmp_path / "k", verbosity=2, gates={"G": True}, config=tmp_path / "c.yaml"
    )
    assert configured[-2:] == ["--feature-gates=G=true", f"--config={tmp_path / 'c.yaml'}"]
    pair = flags.pki.Pair(tmp_path / "c.crt", tmp_path / "c.key")
    api = flags.api_server(
        tmp_path,
        etcd_url="http://127.0.0.1:1",
        port=2,
        ca=tmp_path / "ca.crt",
        serving=pair,
        kubelet_client=pair,
        service_accounts=pair,
        verbosity=1,
        gates={},
        runtime_config=["a/v1=true"],
        extra=["--audit-log-path=x"],
    )
    assert api[-2:] == ["--runtime-config=a/v1=true", "--audit-log-path=x"] and "--secure-port=2" in api


def test_a_component_is_built_once_into_a_cache_keyed_by_version(tmp_path, monkeypatch) -> None:
    if build.shutil.which("go") is None:
        pytest.skip("no Go toolchain on PATH: the build cannot be exercised")
    monkeypatch.setenv("DDPJOB_UPSTREAM_CACHE", str(tmp_path / "cache"))
    component = module(tmp_path / "mods", "good", 'package main\n\nfunc main() { println("hello") }\n')
    folder = build.build(component, quiet=True)
    assert folder.name == "bin" and folder.parent.name.startswith("good-v1.2.3-")
    assert (folder / "hello").is_file() and os.access(folder / "hello", os.X_OK)
    stamp = (folder / "hello").stat().st_mtime_ns
    assert build.build(component, quiet=True) == folder and (folder / "hello").stat().st_mtime_ns == stamp
    (component.folder / "go.mod").write_text((component.folder / "go.mod").read_text().replace("v1.2.3", "v1.2.4"))
    assert build.build(component, quiet=True) != folder  # a new pin is a new cache entry


def test_a_failed_build_is_one_line_naming_its_log(tmp_path, monkeypatch) -> None:
    if build.shutil.which("go") is None:
        pytest.skip("no Go toolchain on PATH: the build cannot be exercised")
    monkeypatch.setenv("DDPJOB_UPSTREAM_CACHE", str(tmp_path / "cache"))
    component = module(tmp_path / "mods", "broken", "package main\n\nfunc main() { undefined() }\n")
    with pytest.raises(go_module.BuildError) as raised:
        build.build(component, quiet=True)
    message = str(raised.value)
    assert "\n" not in message and "building broken v1.2.3 failed" in message and "build.log" in message
    log = pathlib.Path(message.split("see ", 1)[1].split(":", 1)[0])
    assert "undefined" in log.read_text()
    assert build.cached(component) is None  # nothing half-built is taken for a build


def test_no_go_toolchain_is_one_line(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DDPJOB_UPSTREAM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    component = go_module.Component("kubernetes", "k8s.io/kubernetes")
    with pytest.raises(go_module.BuildError, match=r"no `go` command is on PATH"):
        build.build(component, quiet=True)
    assert build.main(["nonsense"]) == 2


def test_a_binary_that_exits_at_start_is_one_line_naming_its_log(tmp_path) -> None:
    component = Component(
        "fake-apiserver",
        [sys.executable, "-c", 'import sys; print("unknown flag: --x"); sys.exit(3)'],
        tmp_path / "fake.log",
    )
    with pytest.raises(StartFailure) as raised:
        component.wait_ready(lambda: False, REACTION, "ready")
    assert str(raised.value) == (
        f"fake-apiserver exited with code 3 during start (unknown flag: --x); log: {tmp_path / 'fake.log'}"
    )


def test_a_port_in_use_is_refused_before_starting(tmp_path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(StartFailure, match=f"port {port} on 127.0.0.1 is already in use"):
            Component("etcd", [sys.executable, "-c", "pass"], tmp_path / "etcd.log", ports=(port,))


def test_a_component_not_ready_by_its_deadline_is_stopped(tmp_path) -> None:
    component = Component("slow", [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "slow.log")
    with pytest.raises(StartFailure, match=r"slow was not ready within 1 s; log: "):
        component.wait_ready(lambda: False, 1, "ready")
    assert not component.alive


def test_nodes_register_with_gpus_schedule_by_them_and_go_away(control_plane, tmp_path) -> None:
    gpu = NodeAgent(control_plane, NodeShape("gpu-node", gpus=2), tmp_path / "kubelet").start()
    api = kubernetes.config.new_client_from_config(str(control_plane.admin_kubeconfig))
    core = kubernetes.client.CoreV1Api(api)
    try:
        node = core.read_node("gpu-node")
        assert node.status is not None and node.status.allocatable is not None
        assert node.status.allocatable["nvidia.com/gpu"] == "2"
        leases = kubernetes.client.CoordinationV1Api(api)

        def lease() -> object:
            try:
                return leases.read_namespaced_lease("gpu-node", "kube-node-lease")
            except kubernetes.client.ApiException:
                return None

        renewed = wait_until(lease, REACTION, "the node did not take its Lease")  # its heartbeat thread makes it
        assert renewed.spec.holder_identity == "gpu-node" and renewed.spec.lease_duration_seconds == 40
        wait_until(
            lambda: not ((spec := core.read_node("gpu-node").spec) and spec.taints),
            PHASE,
            "the node lifecycle controller did not lift the not-ready taint",
        )

        def pod(name: str, gpus: int) -> dict:
            return {
                "metadata": {"name": name},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "trainer",
                            "image": "x",
                            "command": [sys.executable, "-c", 'print("on a gpu node")'],
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                        }
                    ],
                },
            }

        core.create_namespaced_pod("default", pod("fits", 2))  # type: ignore[arg-type]  # a dict body: the client sends it as it is
        core.create_namespaced_pod("default", pod("too-big", 3))  # type: ignore[arg-type]  # a dict body: the client sends it as it is
        wait_until(
            lambda: (status := core.read_namespaced_pod("fits", "default").status) and status.phase == "Succeeded",
            PHASE,
            "the Pod that fits did not run",
        )
        pending = wait_until(
            lambda: next(
                (
                    c
                    for c in (
                        core.read_namespaced_pod("too-big", "default").status or kubernetes.client.V1PodStatus()
                    ).conditions
                    or []
                    if c.type == "PodScheduled" and c.status == "False"
                ),
                None,
            ),
            REACTION,
            "the Pod asking for 3 GPUs was not reported unschedulable",
        )
        assert pending.reason == "Unschedulable" and "Insufficient nvidia.com/gpu" in pending.message
    finally:
        for name in ("fits", "too-big"):
            core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
        gpu.stop()
    with pytest.raises(kubernetes.client.ApiException) as gone:
        core.read_node("gpu-node")
    assert gone.value.status == 404 and not gpu.kubelet.live_processes()
    api.close()


@pytest.mark.parametrize("kill", [True, False])
def test_a_component_that_holds_on_to_sigterm_dies_with_its_starter_only_when_killed(tmp_path, kill) -> None:
    """kube-apiserver, given SIGTERM with its etcd, waited on the dead etcd to remove its
    Lease for over an hour after a killed test run: it is SIGKILLed with its starter."""
    pid_file = tmp_path / "pid"
    starter = (
        "import pathlib, sys, time\n"
        "from ddpjob_devcluster.controlplane.process import Component\n"
        "c = Component('holder', [sys.executable, '-c', "
        "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'], "
        f"pathlib.Path({str(tmp_path / 'holder.log')!r}), kill_with_parent={kill})\n"
        f"pathlib.Path({str(pid_file)!r}).write_text(str(c.popen.pid))\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", starter])
    holder = 0
    try:
        deadline = time.monotonic() + REACTION
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline and parent.poll() is None, "the starter did not start its component"
            time.sleep(0.05)
        holder = int(pid_file.read_text())
        time.sleep(0.5)  # the holder's SIG_IGN in place
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + (REACTION if kill else 2)  # a SIGTERM is ignored at once
        while _running(holder) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _running(holder) is not kill
    finally:
        if holder and _running(holder):
            os.kill(holder, signal.SIGKILL)
        if parent.poll() is None:
            parent.kill()


def _running(pid: int) -> bool:
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
