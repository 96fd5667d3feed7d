"""`ddpjob submit|get|describe|wait|delete|suspend|resume` against the real kube-apiserver
(in-process `main()`, the user's kubeconfig via KUBECONFIG, a namespace of the test's own:
tests/cli/conftest.py), and their one-line errors."""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any

import pytest
import yaml

from ddpjob.api import names
from ddpjob.cli.main import main
from tests.cli.conftest import writes
from tests.support.deadlines import TEST

# A test's bound covers the worker's control plane starting, when it is the first to ask.
pytestmark = pytest.mark.timeout(TEST)
ROOT = pathlib.Path(__file__).resolve().parents[2]
JOB: dict[str, Any] = {
    "apiVersion": "ddpjob.io/v1alpha1",
    "kind": "DDPJob",
    "metadata": {"name": "hello"},
    "spec": {"nodes": 2, "image": "ddpjob/trainer:test"},
}


def ddpjob(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def job_file(tmp_path: pathlib.Path, **spec: Any) -> str:
    body = {**JOB, "spec": {**JOB["spec"], **spec}}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(body))
    return str(path)


def test_submit_applies_in_the_contexts_namespace_and_is_idempotent(capsys, cluster, tmp_path) -> None:
    code, out, err = ddpjob(capsys, "submit", job_file(tmp_path))
    assert (code, out.strip(), err) == (0, "ddpjob.ddpjob.io/hello", "")
    stored = cluster.job("hello")
    assert stored["spec"]["nodes"] == 2
    assert [m["manager"] for m in stored["metadata"]["managedFields"]] == ["ddpjob"]
    # Applying a changed file updates the object (server-side apply, same field manager).
    code, _, _ = ddpjob(capsys, "submit", job_file(tmp_path, maxRestarts=7))
    assert code == 0
    assert cluster.job("hello")["spec"]["maxRestarts"] == 7


def test_submit_validates_first_and_sends_nothing(capsys, cluster, sent, tmp_path) -> None:
    code, out, err = ddpjob(capsys, "submit", job_file(tmp_path, nodes=0))
    assert code == 1 and out == ""
    assert "spec.nodes" in err and "Traceback" not in err
    assert writes(sent) == [] and cluster.job("hello") is None


def test_get_prints_the_servers_table_and_yaml_json(capsys, cluster, tmp_path) -> None:
    ddpjob(capsys, "submit", job_file(tmp_path))
    code, out, _ = ddpjob(capsys, "get")
    lines = out.splitlines()
    assert code == 0 and lines[0].split()[:5] == ["NAME", "NODES", "PROCS", "PHASE", "RESTARTS"]
    assert lines[0].split()[-1] == "AGE"  # the CRD's printer columns, in its order
    # No status yet: NODES (running/desired, from the status) and the phase are empty, and
    # print nothing, as kubectl prints a cell the server's Table has no value for.
    assert lines[1].split()[0] == "hello" and len(lines[1].split()) == 2 and "<none>" not in out  # NAME, AGE
    # A failed job's long message is cut in the table, whole with -o wide.
    message = "Pod hello-1 failed (exit code 1, Error): " + "RuntimeError: x " * 20 + "; maxRestarts=3 reached"
    cluster.set_status("hello", phase="Failed", message=message)
    row = ddpjob(capsys, "get")[1].splitlines()[1]
    assert message[:77] + "..." in row and message not in row
    assert message in ddpjob(capsys, "get", "-o", "wide")[1]
    code, out, _ = ddpjob(capsys, "get", "hello", "-o", "json")
    assert code == 0 and json.loads(out)["metadata"]["name"] == "hello"
    code, out, _ = ddpjob(capsys, "get", "-o", "yaml")
    assert code == 0 and yaml.safe_load(out)["items"][0]["spec"]["nodes"] == 2


def test_wait_exit_codes(capsys, cluster, tmp_path) -> None:
    ddpjob(capsys, "submit", job_file(tmp_path))
    code, _, err = ddpjob(capsys, "wait", "hello", "--for=Succeeded", "--timeout=0.3s")
    assert code == 2 and "timed out" in err
    cluster.set_status("hello", phase="Failed")
    assert ddpjob(capsys, "wait", "hello", "--for=Failed")[0] == 0
    assert ddpjob(capsys, "wait", "hello", "--for=Succeeded", "--timeout=5s")[0] == 1  # ended otherwise


def test_get_wide_adds_the_wide_columns_and_yaml_hides_managed_fields(capsys, cluster, tmp_path) -> None:
    ddpjob(capsys, "submit", job_file(tmp_path))
    code, out, _ = ddpjob(capsys, "get", "-o", "wide")
    headers = out.splitlines()[0].split()
    # Every column in the CRD's order, the priority-1 ones (WORLD, BACKEND) included, as kubectl -o wide.
    assert code == 0 and headers[:3] == ["NAME", "NODES", "PROCS"] and {"WORLD", "BACKEND", "PHASE"} <= set(headers)
    assert not {"WORLD", "BACKEND"} & set(ddpjob(capsys, "get")[1].splitlines()[0].split())
    for argv in (("get", "hello", "-o", "yaml"), ("get", "-o", "json")):
        code, out, _ = ddpjob(capsys, *argv)
        assert code == 0 and "managedFields" not in out and "hello" in out
    code, out, _ = ddpjob(capsys, "get", "hello", "-o", "yaml", "--show-managed-fields")
    assert code == 0 and yaml.safe_load(out)["metadata"]["managedFields"][0]["manager"] == "ddpjob"


def test_delete_takes_several_names_and_goes_on_past_a_missing_one(capsys, cluster, tmp_path) -> None:
    for name in ("a", "b"):
        body = {**JOB, "metadata": {"name": name}}
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(body))
        assert ddpjob(capsys, "submit", str(tmp_path / f"{name}.yaml"))[0] == 0
    code, out, err = ddpjob(capsys, "suspend", "a", "b")
    assert code == 0 and out.splitlines() == ["ddpjob.ddpjob.io/a suspended", "ddpjob.ddpjob.io/b suspended"]
    code, out, err = ddpjob(capsys, "delete", "a", "nope", "b")
    assert code == 1
    assert out.splitlines() == ["ddpjob.ddpjob.io/a deleted", "ddpjob.ddpjob.io/b deleted"]
    assert err.strip() == f"error: not found: ddpjob nope in namespace {cluster.namespace}"
    assert cluster.job("b") is None


def test_suspend_resume_delete(capsys, cluster, tmp_path) -> None:
    ddpjob(capsys, "submit", job_file(tmp_path))
    assert ddpjob(capsys, "suspend", "hello")[0] == 0
    assert cluster.job("hello")["spec"]["suspend"] is True
    assert ddpjob(capsys, "resume", "hello")[0] == 0
    assert cluster.job("hello")["spec"]["suspend"] is False
    assert ddpjob(capsys, "delete", "hello")[0] == 0
    assert cluster.job("hello") is None


def test_namespace_flag_overrides_the_context(capsys, cluster, tmp_path) -> None:
    other = cluster.make_namespace("other")
    assert ddpjob(capsys, "submit", job_file(tmp_path), "-n", other)[0] == 0
    assert cluster.job("hello", other) is not None
    code, _, err = ddpjob(capsys, "describe", "hello")  # the context's namespace
    assert code == 1 and err.strip() == f"error: not found: ddpjob hello in namespace {cluster.namespace}"


def test_unknown_context_is_one_line(capsys, kubeconfig) -> None:
    code, _, err = ddpjob(capsys, "get", "--context", "nope")
    assert code == 1 and err.startswith("error: no cluster:") and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("case", ["no-kubeconfig", "unreachable", "no-crd", "forbidden"])
def test_errors_are_one_line(capsys, case, cluster, kubeconfig, tmp_path, monkeypatch) -> None:
    if case == "no-kubeconfig":
        monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
        expected = "error: no cluster: no kubeconfig at"
    elif case == "unreachable":
        config = yaml.safe_load(kubeconfig.read_text())
        config["clusters"][0]["cluster"]["server"] = "http://127.0.0.1:9"  # nothing listens there
        kubeconfig.write_text(yaml.safe_dump(config))
        expected = "error: cannot reach the cluster at http://127.0.0.1:9"
    elif case == "no-crd":
        # The worker's plane has the CRD (one plane serves every test in turn): the command
        # asks for a group no CRD serves, and the real server answers as it does without one.
        monkeypatch.setattr(names, "GROUP", "absent.ddpjob.io")
        expected = "error: the DDPJob CRD (ddpjobs.absent.ddpjob.io) is not installed in this cluster"
    else:  # a user of the cluster's CA with no role: RBAC's own refusal
        user = cluster.plane.client_kubeconfig(f"{cluster.namespace}-nobody", "nobody", namespace=cluster.namespace)
        monkeypatch.setenv("KUBECONFIG", str(user))
        expected = 'error: forbidden: ddpjobs.ddpjob.io is forbidden: User "nobody" cannot list resource "ddpjobs"'

    code, out, err = ddpjob(capsys, "get")
    assert code == 1 and out == ""
    assert err.startswith(expected), err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


HOSTILE = {
    "checkpoint": {"volume": {"hostPath": {"path": "/", "type": "Directory"}}, "mountPath": "/host"},
    "template": {
        "spec": {
            "securityContext": {"runAsUser": 0, "runAsNonRoot": False},
            "nodeName": "node-1",
            "tolerations": [{"operator": "Exists"}],
        }
    },
}


def test_validate_and_submit_refuse_the_checkpoint_hostpath_job_naming_each_field(capsys, cluster, tmp_path) -> None:
    only = job_file(tmp_path, checkpoint=HOSTILE["checkpoint"])
    code, out, err = ddpjob(capsys, "validate", "-f", only)
    assert code != 0 and err.strip().splitlines() == [
        f"{only}: spec.checkpoint.volume.hostPath: a hostPath volume is refused by the operator's template policy "
        "(an admin can allow it: templatePolicy.allow: [hostPath])"
    ]
    path = job_file(tmp_path, **HOSTILE)
    code, out, err = ddpjob(capsys, "validate", "-f", path)
    lines = err.strip().splitlines()
    assert (
        code != 0 and out == "" and f"{path}: spec.checkpoint.volume.hostPath: a hostPath volume is refused" in lines[0]
    )
    assert any("spec.template.spec.nodeName" in line for line in lines)
    assert any("spec.template.spec.tolerations[0]" in line for line in lines)
    code, out, err = ddpjob(capsys, "submit", path)
    assert code != 0 and "spec.checkpoint.volume.hostPath" in err and out == ""
    assert cluster.job("hello") is None  # nothing was stored
    # An admin whose operator allows it says so, or skips the check.
    code, out, err = ddpjob(capsys, "submit", path, "--template-allow", "hostPath,nodeName,tolerateAll")
    assert (code, out.strip()) == (0, "ddpjob.ddpjob.io/hello"), err
    code, _, err = ddpjob(capsys, "submit", path, "--template-allow", "root")
    assert code != 0 and "--template-allow: unknown template allowance 'root'" in err


def test_wait_says_what_happened_when_the_job_ends_otherwise(capsys, cluster, tmp_path) -> None:
    assert ddpjob(capsys, "submit", job_file(tmp_path))[0] == 0
    cluster.set_status(
        "hello",
        phase="Failed",
        message="node 1 exited with code 2\x1b[2J",
        lastFailure={"reason": "Error", "pod": "hello-1"},
    )
    code, out, err = ddpjob(capsys, "wait", "hello", "--for=Succeeded", "--timeout=5s")
    assert code == 1 and err.strip() == "hello Failed: Error: node 1 exited with code 2\\x1b[2J"
    code, out, err = ddpjob(capsys, "wait", "hello", "--for=Failed", "--timeout=5s")
    assert code == 0 and out.strip() == "hello Failed: Error: node 1 exited with code 2\\x1b[2J"


def test_describe_a_stored_job(capsys, cluster, tmp_path) -> None:
    assert ddpjob(capsys, "submit", job_file(tmp_path, suspend=False))[0] == 0
    code, out, err = ddpjob(capsys, "describe", "hello")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == "Name:       hello" and lines[1] == f"Namespace:  {cluster.namespace}"
    assert lines[2].startswith("Created:    ") and lines[2].endswith(" ago)")  # its age, from the server's time
    assert [line.split() for line in lines if line.startswith("  suspend:")] == [["suspend:", "false"]]
    assert "Events:  <none>" in lines


def test_wait_golden(capsys, cluster, tmp_path) -> None:
    """What `ddpjob wait` prints and exits with in each case (tests/cli/golden/wait.txt;
    UPDATE_GOLDEN=1 rewrites it)."""
    assert ddpjob(capsys, "submit", job_file(tmp_path))[0] == 0
    transcript = []

    def wait(*argv: str) -> None:
        code, out, err = ddpjob(capsys, "wait", "hello", *argv)
        transcript.append(f"$ ddpjob wait hello {' '.join(argv)}\n{out}{err}[exit {code}]")

    def status(**fields: Any) -> None:
        cluster.set_status("hello", **fields)

    wait("--for=Running", "--timeout=0.2s")
    status(phase="Running", message="2/2 nodes running")
    wait("--for=Running")
    status(
        phase="Failed",
        message="Pod hello-1 failed (exit code 2, Error); maxRestarts=3 reached",
        lastFailure={"reason": "Error", "pod": "hello-1", "exitCode": 2},
    )
    wait("--for=Succeeded", "--timeout=5s")
    wait("--for=Failed")
    status(phase="Succeeded", message="every node finished", lastFailure=None)
    wait("--for=Succeeded")
    wait("--for=Failed")  # ended otherwise: the phase is said once, then the message
    text = "\n".join(transcript) + "\n"
    golden = ROOT / "tests" / "cli" / "golden" / "wait.txt"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()


def test_submit_wait_says_each_phase_once_and_never_a_bare_pending(capsys, cluster, tmp_path, monkeypatch) -> None:
    from ddpjob.cli import job_phase

    statuses = iter(
        [
            {},
            {},
            {"phase": "Pending", "message": "creating 2 Pod(s)"},
            {"phase": "Pending", "restarts": 0, "message": "0/2 nodes running"},
            {"phase": "Running", "restarts": 0, "message": "all 2 nodes running (2 processes)"},
            {"phase": "Succeeded", "restarts": 0, "message": "all 2 nodes finished successfully"},
        ]
    )
    real_get = job_phase.get_job
    monkeypatch.setattr(job_phase, "get_job", lambda conn, name: {**real_get(conn, name), "status": next(statuses)})
    monkeypatch.setattr(job_phase.time, "sleep", lambda seconds: None)
    code, out, err = ddpjob(capsys, "submit", job_file(tmp_path), "--wait")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "ddpjob.ddpjob.io/hello",
        "hello: Pending: creating 2 Pod(s)",
        "hello: Running: all 2 nodes running (2 processes)",
        "hello: Succeeded: all 2 nodes finished successfully",
    ]


def test_submit_wait_says_once_when_no_operator_writes_a_status(capsys, cluster, tmp_path, monkeypatch) -> None:
    from ddpjob.cli import job_phase

    clock = [0.0]
    monkeypatch.setattr(job_phase.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(job_phase.time, "sleep", lambda seconds: clock.__setitem__(0, clock[0] + max(seconds, 0.1)))
    code, out, err = ddpjob(capsys, "submit", job_file(tmp_path), "--wait", "--timeout=30s")
    assert code == 2 and "timed out waiting for hello (phase Pending)" in err
    assert out.splitlines() == [
        "ddpjob.ddpjob.io/hello",
        f"hello: no status after {job_phase.NO_STATUS_SAY_AFTER:.0f}s: is the ddpjob operator running on this cluster?",
    ]
