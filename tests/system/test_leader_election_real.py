"""Two replicas of the operator on the real control plane, installed from the chart with its
RBAC (leader election on a Lease, the chart's default): one leads and the Lease names it;
the other stands by and sends nothing but reads of the Lease. A leader killed outright
(SIGKILL, as its node dying) is replaced once the Lease expires, and the job's status goes
on being written by the new leader, with no Pod created twice and no restart counted. A
leader stopped with SIGTERM (a rollout, a drain) releases the Lease, and the standby takes
it from the empty holder instead of waiting it out.

The holders are read from a watch of the Lease: every write is seen, the released state
between two holders included."""

from __future__ import annotations

import contextlib
import copy
import pathlib
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import aiohttp.web
import kubernetes
import pytest

from ddpjob_devcluster.clusters.client import OperatorProcess, load_example, wait_until
from ddpjob_devcluster.clusters.real import RealCluster
from ddpjob_devcluster.scenarios.chaos import Chaos
from ddpjob_devcluster.scenarios.fault_proxy import FaultProxy, point_kubeconfig_at
from tests.support.control_plane import real_cluster
from tests.support.deadlines import CLUSTER_TEST, PHASE, REACTION, RUN

pytestmark = [pytest.mark.slow, pytest.mark.timeout(CLUSTER_TEST)]

STANDBY_POD = "ddpjob-operator-standby"  # the second replica's Pod name (POD_ID)


class RecordingProxy(FaultProxy):
    """Passes every request through (no faults) and records its method and path."""

    def __init__(self, cluster: RealCluster):
        super().__init__(cluster.plane.server, cluster.plane.ca, Chaos(rate=0.0, watch_lifetime=None))
        self.seen: list[tuple[str, str]] = []

    async def _handle(self, request: aiohttp.web.Request) -> aiohttp.web.StreamResponse:
        self.seen.append((request.method, request.path))
        return await super()._handle(request)


class LeaseHolders:
    """Each holder of the Lease in turn, with when the watch saw it ('' once released)."""

    def __init__(self, cluster: RealCluster, namespace: str, name: str):
        self.api = kubernetes.config.new_client_from_config(str(cluster.kubeconfig))
        self.namespace, self.name = namespace, name
        self.seen: list[tuple[float, str]] = []
        self.transitions = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="lease-watch", daemon=True)

    def __enter__(self) -> LeaseHolders:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self.api.close()

    def holders(self) -> list[str]:
        return [holder for _, holder in self.seen]

    def _watch(self) -> None:
        leases, version = kubernetes.client.CoordinationV1Api(self.api), None
        while not self._stop.is_set():
            watch = kubernetes.watch.Watch()
            try:
                for event in watch.stream(
                    leases.list_namespaced_lease,
                    self.namespace,
                    resource_version=version,
                    field_selector=f"metadata.name={self.name}",
                    timeout_seconds=2,
                ):
                    lease = event["object"]
                    version = lease.metadata.resource_version
                    holder = lease.spec.holder_identity or ""
                    self.transitions = lease.spec.lease_transitions or 0
                    if not self.seen or self.seen[-1][1] != holder:
                        self.seen.append((time.monotonic(), holder))
                    if self._stop.is_set():
                        watch.stop()
            except kubernetes.client.ApiException as exc:
                if exc.status != 410:  # 410: too old a version; start over from a fresh list
                    raise
                version = None


def pod_of(holder: str) -> str:
    """The Pod name in a holder identity, `<pod>_<uuid>`."""
    return holder.rsplit("_", 1)[0]


def lease_of(cluster: RealCluster) -> tuple[str, str]:
    op = cluster.operator
    assert op is not None  # started
    env = op.env
    assert env is not None  # the chart's Deployment's environment
    return env["DDPJOB_LEADER_ELECTION_NAMESPACE"], env["DDPJOB_LEADER_ELECTION_LEASE"]


@contextlib.contextmanager
def standby(cluster: RealCluster, proxy: RecordingProxy | None = None) -> Iterator[OperatorProcess]:
    """A second replica: the chart's Deployment's command, environment and ServiceAccount,
    another Pod name; through `proxy` when given."""
    first = cluster.operator
    assert first is not None and first.env is not None  # started, with the chart's environment
    config = cluster.workdir / "standby.kubeconfig"
    shutil.copy(first.kubeconfig, config)
    if proxy is not None:
        point_kubeconfig_at(config, proxy.url)
    env = dict(first.env, KUBECONFIG=str(config), POD_ID=STANDBY_POD)
    second = OperatorProcess(config, cluster.workdir / "standby.log", command=first.command, env=env).start()
    try:
        yield second
    finally:
        second.stop()
        print("--- standby operator log ---\n" + second.log_tail())


def slow_job(name: str, release: pathlib.Path) -> dict[str, Any]:
    """2 nodes x 1 process, 120 steps of at least 0.5 s each until `release` exists: training
    outlasts the hand-over; the steps left then run at full speed."""
    body = copy.deepcopy(load_example())
    body["metadata"]["name"] = name
    body["spec"].update(
        nprocPerNode=1,
        restartBackoffSeconds=0,
        args=[
            "ddpjob-train",
            "--epochs",
            "1",
            "--synthetic-size",
            "3840",
            "--batch-size",
            "16",
            "--log-every",
            "10",
            "--eval-every",
            "0",
        ],
        env=[
            {"name": "DDPJOB_TEST_STEP_SECONDS", "value": "0.5"},
            {"name": "DDPJOB_TEST_STEP_SECONDS_UNTIL", "value": str(release)},
        ],
    )
    return body


@pytest.fixture
def elected_cluster(
    request: pytest.FixtureRequest, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[RealCluster]:
    # The operator reads /progress every second: its status writes go on while a job trains.
    monkeypatch.setenv("DDPJOB_PROGRESS_INTERVAL_SECONDS", "1")
    with real_cluster(request, tmp_path / "cluster") as cluster:
        yield cluster


def test_a_killed_leader_is_replaced_by_the_standby_which_wrote_nothing_and_the_job_goes_on(
    elected_cluster: RealCluster,
) -> None:
    cluster, name = elected_cluster, "handover"
    namespace, lease = lease_of(cluster)
    leader = cluster.operator
    assert leader is not None  # started
    proxy = RecordingProxy(cluster).start()
    kubelet = cluster.kubelet
    assert kubelet is not None  # started
    try:
        with LeaseHolders(cluster, namespace, lease) as holders:
            first = wait_until(lambda: holders.holders() and holders.holders()[-1], REACTION, "no Lease holder")
            assert leader.env is not None and pod_of(first) == leader.env["POD_ID"]
            with standby(cluster, proxy) as second:
                wait_until(
                    lambda: f"standby: {first} leads" in second.log_tail(200),
                    REACTION,
                    "the second replica never said it stands by",
                    lambda: second.log_tail(),
                )
                release = cluster.workdir / f"{name}-release"
                cluster.create_job(slow_job(name, release))
                step = wait_until(
                    lambda: (cluster.status(name).get("progress") or {}).get("step"),
                    PHASE,
                    "no status.progress while it trains",
                    lambda: cluster.status(name),
                )
                before = cluster.status(name)
                uids = {p["metadata"]["uid"] for p in cluster.pods(name)}
                assert before["phase"] == "Running" and before["restarts"] == 0 and len(uids) == 2
                # The standby sent nothing but reads of the Lease.
                lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{lease}"
                assert proxy.seen and set(proxy.seen) == {("GET", lease_path)}, sorted(set(proxy.seen))
                assert holders.holders() == [first]

                killed = time.monotonic()
                leader.stop(signal.SIGKILL)
                took_over = wait_until(
                    lambda: len(holders.seen) > 1 and holders.seen[-1],
                    REACTION,
                    "the standby never led",
                    lambda: second.log_tail(),
                )
                # Taken over once the Lease expired, never released: straight from one holder to the next.
                assert pod_of(took_over[1]) == STANDBY_POD and holders.holders() == [first, took_over[1]]
                assert holders.transitions == 1 and second.alive
                # The job's status goes on: progress written after the kill, by the only replica alive.
                wait_until(
                    lambda: (cluster.status(name).get("progress") or {}).get("step", 0) > step,
                    PHASE,
                    "no status write after the leader was killed",
                    lambda: cluster.status(name),
                )
                resumed = time.monotonic()
                release.touch()  # the hand-over is over: the rest of the job is only its end
                status = cluster.wait_phase(name, "Succeeded", timeout=RUN)
                print(
                    f"leader killed: the standby led after {took_over[0] - killed:.1f} s, "
                    f"status.progress was written again after {resumed - killed:.1f} s"
                )
                assert status["restarts"] == 0
                assert {p["metadata"]["uid"] for p in cluster.pods(name)} == uids
                assert len(kubelet.containers) == 2  # no Pod was created twice
                assert holders.holders() == [first, took_over[1]]
    finally:
        proxy.stop()


@pytest.fixture
def long_lease_cluster(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[RealCluster]:
    # A Lease that would take 300 s to expire: a take-over within REACTION comes from a release.
    values = {"leaderElection": {"leaseDuration": 300, "renewDeadline": 7, "retryPeriod": 2}}
    with real_cluster(request, tmp_path / "cluster", values=values) as cluster:
        yield cluster


def test_a_leader_stopped_with_sigterm_releases_the_lease_and_the_standby_leads_at_once(
    long_lease_cluster: RealCluster,
) -> None:
    cluster = long_lease_cluster
    namespace, lease = lease_of(cluster)
    leader = cluster.operator
    assert leader is not None  # started
    with LeaseHolders(cluster, namespace, lease) as holders:
        first = wait_until(lambda: holders.holders() and holders.holders()[-1], REACTION, "no Lease holder")
        with standby(cluster) as second:
            wait_until(
                lambda: f"standby: {first} leads" in second.log_tail(200),
                REACTION,
                "the second replica never said it stands by",
                lambda: second.log_tail(),
            )
            stopped = time.monotonic()
            assert leader.stop(signal.SIGTERM) == 0
            assert "released by" in leader.log_tail(20)
            took_over = wait_until(
                lambda: holders.seen[-1][1] not in ("", first) and holders.seen[-1],
                REACTION,
                "the standby did not take the released Lease",
                lambda: second.log_tail(),
            )
            print(f"leader stopped: the standby led {took_over[0] - stopped:.1f} s after SIGTERM")
            assert holders.holders() == [first, "", took_over[1]] and pod_of(took_over[1]) == STANDBY_POD
            assert holders.transitions == 1 and second.alive
