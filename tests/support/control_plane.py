"""The real control plane for the tests (a pytest plugin): one per test worker, started
once and shared by that worker's tests in turn; each test gets a `RealCluster` of its
own on it (its namespace, Nodes and chart-installed operator), which leaves no process
behind and prints the diagnostics when the test failed.

Beside it, once per worker too: the DDPJob CRD (`ddpjob_crd`) for the tests that only
use the API, and a Node with no kubelet (`stand_in_node`, tests/support/stand_in_node.py)
for the tests that play the kubelet themselves.

`make test` builds the binaries first (`make control-plane`); run alone, the first
start builds them. Without a Go toolchain and no cached binaries, the tests that need
the control plane are skipped, saying so.
"""

from __future__ import annotations

import contextlib
import pathlib
import shutil
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

# Imported when a test asks for the control plane: the trainer's tests run where the
# operator's dependencies (kubernetes, cryptography) are not installed.
if TYPE_CHECKING:
    from ddpjob_devcluster.clusters.real import RealCluster
    from ddpjob_devcluster.controlplane.controlplane import ControlPlane
    from tests.support.real_crd import RealCRD
    from tests.support.stand_in_node import StandInNode


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    from ddpjob_devcluster.controlplane import build
    from ddpjob_devcluster.controlplane.controlplane import ControlPlane

    if shutil.which("go") is None and not all(build.cached(build.COMPONENTS[c]) for c in build.PLANE):
        pytest.skip("the real control plane is built with Go, and no `go` is on PATH (nor cached binaries)")
    with ControlPlane(tmp_path_factory.mktemp("control-plane")) as plane:
        yield plane


@pytest.fixture(scope="session")
def ddpjob_crd(control_plane: ControlPlane) -> dict[str, Any]:
    """The DDPJob CRD on the worker's plane, once: a system test's chart install on the same
    plane applies the same CRD (tests/deploy checks the copies agree). The CRD as applied."""
    import kubernetes

    from tests.conftest import project_crd
    from tests.support import real_crd

    crd = project_crd()
    with kubernetes.config.new_client_from_config(str(control_plane.admin_kubeconfig)) as api:
        real_crd.install(api, crd)
    return crd


@pytest.fixture(scope="session")
def ddpjob_validator(control_plane: ControlPlane, ddpjob_crd: dict[str, Any]) -> Iterator[RealCRD]:
    """The DDPJob CRD as the worker's real API server enforces it (tests/support/real_crd.py),
    in a namespace of its own."""
    import uuid

    import kubernetes

    from tests.support import real_crd

    with (
        kubernetes.config.new_client_from_config(str(control_plane.admin_kubeconfig)) as api,
        real_crd.in_namespace(api, f"validate-{uuid.uuid4().hex[:8]}", ddpjob_crd) as validator,
    ):
        yield validator


@pytest.fixture(scope="session")
def pod_admission(control_plane: ControlPlane) -> Iterator[Callable[[dict[str, Any], str], str]]:
    """The real API server's judgement of a Pod: `refused(pod_spec, level)` sends a Pod of
    that spec as a dry run to a namespace whose Pod Security `enforce` level is `level`
    (privileged, baseline, restricted) and returns what it refused ("" if nothing): Pod
    validation, Pod Security and the other admission plugins, as a create would meet them."""
    import json
    import uuid

    import kubernetes

    from tests.support import real_crd

    suffix = uuid.uuid4().hex[:8]
    levels = ("privileged", "baseline", "restricted")
    with kubernetes.config.new_client_from_config(str(control_plane.admin_kubeconfig)) as api:
        core = kubernetes.client.CoreV1Api(api)
        for level in levels:
            labels = {"pod-security.kubernetes.io/enforce": level}
            core.create_namespace({"metadata": {"name": f"{level}-{suffix}", "labels": labels}})  # type: ignore[arg-type]  # a dict body: the client sends it as it is

        def refused(spec: dict[str, Any], level: str) -> str:
            body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "admitted"}, "spec": spec}
            try:  # sent as it is: the client's models would refuse an integer quantity the server takes
                real_crd.send(api, "POST", f"/api/v1/namespaces/{level}-{suffix}/pods", body)
            except real_crd.Refused as exc:
                return str(json.loads(exc.body).get("message") or exc)
            return ""

        try:
            yield refused
        finally:
            for level in levels:
                core.delete_namespace(f"{level}-{suffix}")


@pytest.fixture(scope="session")
def _stand_in_node(control_plane: ControlPlane) -> Iterator[StandInNode]:
    from tests.support.stand_in_node import StandInNode

    node = StandInNode(str(control_plane.admin_kubeconfig)).start(cordoned=True)
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture
def stand_in_node(_stand_in_node: StandInNode) -> Iterator[StandInNode]:
    """The worker's stand-in Node, open to new Pods for this test only: between its users
    it is cordoned, or kube-scheduler would place a later test's Pods there (a real
    cluster's on the same plane, whose Pods no kubelet would then run)."""
    _stand_in_node.set_schedulable(True)
    try:
        yield _stand_in_node
    finally:
        _stand_in_node.set_schedulable(False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


@contextlib.contextmanager
def real_cluster(request: pytest.FixtureRequest, workdir: pathlib.Path, **kwargs: Any) -> Iterator[RealCluster]:
    from ddpjob_devcluster.clusters.real import RealCluster

    plane: ControlPlane = request.getfixturevalue("control_plane")
    plane.check_alive()
    cluster = RealCluster(workdir, plane=plane, **kwargs).start()
    try:
        yield cluster
    finally:
        report = getattr(request.node, "report_call", None)
        if report is None or report.failed:
            print("\n===== system diagnostics =====\n" + cluster.diagnostics())
        kubelet = cluster.kubelet
        cluster.stop()
        leftovers = kubelet.live_processes() if kubelet is not None else []
        assert not leftovers, f"processes left running after the test: {leftovers}"
        errors = kubelet.errors if kubelet is not None else []
        assert not errors, f"kubelet errors: {errors}"
        plane.check_alive()
