"""`ddpjob tensorboard NAME` against the real kube-apiserver (tests/cli/conftest.py): it
finds the job's TensorBoard Service in its status, runs `kubectl port-forward` to it with
the user's namespace, prints the URL kubectl listens on and opens it when asked; and says
in one line why it cannot.

kubectl is a stand-in on PATH here (no Node runs a Pod here, and the process kubelet
serves no port-forward: docs/divergences.md, K9); it prints what the real one prints. The
forward through a real Pod is tests/system/test_tensorboard_real.py's."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
from typing import Any

import pytest

from ddpjob_devcluster.clusters.client import ROOT
from tests.cli.conftest import Namespace
from tests.cli.test_cluster_commands import JOB, ddpjob
from tests.support.deadlines import TEST

pytestmark = pytest.mark.timeout(TEST)
GROUP, VERSION, PLURAL = "ddpjob.io", "v1alpha1", "ddpjobs"


def fake_kubectl(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, *lines: str, code: int = 0) -> pathlib.Path:
    """A kubectl that records its arguments, says `lines` and exits with `code`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "argv.json"
    script = bin_dir / "kubectl"
    script.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"json.dump(sys.argv[1:], open({str(record)!r}, 'w'))\n"
        f"print({chr(10).join(lines)!r}, flush=True)\nsys.exit({code})\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return record


def make_job(cluster: Namespace, status: dict[str, Any] | None, **spec: Any) -> None:
    body = {**JOB, "spec": {**JOB["spec"], **spec}}
    cluster.custom.create_namespaced_custom_object(GROUP, VERSION, cluster.namespace, PLURAL, body)
    if status is not None:
        cluster.set_status("hello", **status)


BOARD = {"tensorboard": {"url": "http://hello-tensorboard.team-a.svc:6006/", "service": "hello-tensorboard"}}
ON = {"tensorboard": True, "checkpoint": {"claimName": "ckpt"}}


def test_it_forwards_to_the_service_prints_the_url_and_opens_it(capsys, cluster, tmp_path, monkeypatch) -> None:
    make_job(cluster, BOARD, **ON)
    record = fake_kubectl(tmp_path, monkeypatch, "Forwarding from 127.0.0.1:41234 -> 6006")
    browser = FakeBrowser("firefox")
    monkeypatch.setattr("webbrowser.get", lambda: browser)
    code, out, err = ddpjob(capsys, "tensorboard", "hello", "--open")
    assert (code, err) == (0, ""), err
    assert "TensorBoard of ddpjob hello: http://127.0.0.1:41234/" in out
    assert "opened in the web browser (firefox)" in out
    assert browser.opened == ["http://127.0.0.1:41234/"]
    argv = json.loads(record.read_text())
    assert argv[:4] == ["port-forward", "--namespace", cluster.namespace, "service/hello-tensorboard"]
    assert argv[4:7] == [":6006", "--address", "127.0.0.1"]


def test_a_port_and_a_kubeconfig_are_passed_on(capsys, cluster, tmp_path, monkeypatch) -> None:
    make_job(cluster, BOARD, **ON)
    record = fake_kubectl(tmp_path, monkeypatch, "Forwarding from [::1]:6006 -> 6006")
    code, out, _ = ddpjob(capsys, "tensorboard", "hello", "--port", "6006", "--kubeconfig", str(cluster.kubeconfig))
    assert code == 0 and "http://[::1]:6006/" in out
    argv = json.loads(record.read_text())
    assert "6006:6006" in argv and argv[argv.index("--kubeconfig") + 1] == str(cluster.kubeconfig)


@pytest.mark.parametrize(
    "spec, status, said",
    [
        ({}, None, "has no TensorBoard: set spec.tensorboard: true"),
        (ON, {"tensorboard": {"message": "Deployment hello-tensorboard: forbidden"}}, "could not make"),
        (ON, None, "is not made yet"),
    ],
    ids=["off", "refused", "not-yet"],
)
def test_why_there_is_nothing_to_open_is_one_line(capsys, cluster, tmp_path, monkeypatch, spec, status, said) -> None:
    make_job(cluster, status, **spec)
    record = fake_kubectl(tmp_path, monkeypatch, "Forwarding from 127.0.0.1:1 -> 6006")
    code, out, err = ddpjob(capsys, "tensorboard", "hello")
    assert code == 1 and out == "" and said in err and len(err.strip().splitlines()) == 1, err
    assert not record.exists()  # kubectl never ran


def test_kubectl_failing_is_one_line_with_its_words(capsys, cluster, tmp_path, monkeypatch) -> None:
    make_job(cluster, BOARD, **ON)
    fake_kubectl(tmp_path, monkeypatch, 'error: services "hello-tensorboard" not found', code=1)
    code, _, err = ddpjob(capsys, "tensorboard", "hello")
    assert code == 1
    assert err.strip() == 'error: kubectl port-forward ended: error: services "hello-tensorboard" not found'


def test_a_pod_not_running_yet_is_waited_for(capsys, cluster, tmp_path, monkeypatch) -> None:
    """Right after `ddpjob submit` the TensorBoard Pod is Pending: kubectl refuses to
    forward, and the command starts it again (saying so once) until the Pod runs."""
    make_job(cluster, BOARD, **ON)
    pending = "error: unable to forward port because pod is not running. Current status=Pending"
    record = fake_kubectl(tmp_path, monkeypatch, "Forwarding from 127.0.0.1:41234 -> 6006")
    script = tmp_path / "bin" / "kubectl"
    tries = tmp_path / "tries"
    script.write_text(  # the first two starts find the Pod Pending
        script.read_text().replace(
            "json.dump",
            f"t = open({str(tries)!r}, 'a+'); t.write('.'); t.seek(0); n = len(t.read()); t.close()\n"
            f"if n <= 2: print({pending!r}); sys.exit(1)\njson.dump",
            1,
        )
    )
    code, out, err = ddpjob(capsys, "tensorboard", "hello", "--via", "port-forward")
    assert code == 0, err
    assert tries.read_text() == "..." and record.exists()
    assert "TensorBoard of ddpjob hello: http://127.0.0.1:41234/" in out
    assert err.splitlines() == [
        "waiting for the TensorBoard Pod to run "
        "(unable to forward port because pod is not running. Current status=Pending)"
    ]
    # One that never runs: the wait ends, saying why, in one line.
    tries.write_text("")
    monkeypatch.setattr("ddpjob.cli.port_forward.POD_TIMEOUT", 0.5)
    code, out, err = ddpjob(capsys, "tensorboard", "hello")
    assert code != 0 and "TensorBoard of ddpjob" not in out
    assert err.strip() == (
        "error: the TensorBoard Pod did not run in 0.5s: "
        "unable to forward port because pod is not running. Current status=Pending"
    ), err


def test_a_missing_job_is_not_found(capsys, cluster) -> None:
    code, _, err = ddpjob(capsys, "tensorboard", "nope")
    assert code == 1 and "not found" in err


def test_render_shows_the_tensorboard_the_operator_would_make(capsys, tmp_path) -> None:
    import yaml

    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({**JOB, "spec": {**JOB["spec"], **ON}}))
    code, out, err = ddpjob(capsys, "render", "-f", str(path))
    assert code == 0, err
    kinds = [(o["kind"], o["metadata"]["name"]) for o in yaml.safe_load_all(out)]
    assert kinds[-2:] == [("Service", "hello-tensorboard"), ("Deployment", "hello-tensorboard")]
    path.write_text(yaml.safe_dump(JOB))
    _, out, _ = ddpjob(capsys, "render", "-f", str(path))
    assert "tensorboard" not in out


def test_describe_says_where_the_tensorboard_answers() -> None:
    from datetime import UTC, datetime

    from ddpjob.cli.describe import describe

    job = {
        **JOB,
        "metadata": {"name": "hello", "namespace": "team-a"},
        "spec": {**JOB["spec"], **ON},
        "status": {"phase": "Running", **BOARD},
    }
    text = describe(job, [], [], datetime.now(UTC))
    lines = text.splitlines()
    at = lines.index("TensorBoard:")
    assert lines[at + 1].split() == ["url:", "http://hello-tensorboard.team-a.svc:6006/"]
    assert lines[at + 2].split() == ["service:", "hello-tensorboard"]
    assert any(line.split() == ["tensorboard:", "true"] for line in lines)  # in the Spec section
    del job["status"]["tensorboard"]
    assert "TensorBoard:" not in describe(job, [], [], datetime.now(UTC))


def test_where_the_node_serves_no_port_forward_it_goes_through_the_api_servers_proxy(
    capsys, cluster, tmp_path, monkeypatch
) -> None:
    """The development cluster's process kubelet serves no port-forward (docs/divergences.md,
    K9): kubectl says so, and `--via auto` tries the API server's service proxy, which
    answers 404 here, where no Service was made (the page through it is
    tests/devcluster/demo/test_demo_tensorboard.py's)."""
    make_job(cluster, BOARD, **ON)
    fake_kubectl(tmp_path, monkeypatch, "error: error upgrading connection: unable to upgrade connection: 404", code=1)
    monkeypatch.setattr("ddpjob.cli.tensorboard.ANSWER_TIMEOUT", 0.0)
    code, out, err = ddpjob(capsys, "tensorboard", "hello")
    assert len(err.strip().splitlines()) == 2, err
    first, second = err.strip().splitlines()
    assert first == (
        "kubectl port-forward was refused (error upgrading connection: unable to upgrade "
        "connection: 404); going through the API server's service proxy instead"
    )
    assert code == 1 and out == ""
    assert second.startswith("error: TensorBoard did not answer through the API server in 0s: 404"), second
    # Asked for, port-forward alone: kubectl's words, no second try.
    code, _, err = ddpjob(capsys, "tensorboard", "hello", "--via", "port-forward")
    assert code == 1 and err.strip().splitlines() == [
        "error: kubectl port-forward ended: error upgrading connection: unable to upgrade connection: 404"
    ]


def test_the_api_servers_html_error_page_is_not_shown(capsys, cluster, tmp_path, monkeypatch) -> None:
    """What kubectl prints where the API server cannot upgrade the connection to the node:
    its words, then the API server's HTML page, which a one-line message leaves out."""
    make_job(cluster, BOARD, **ON)
    fake_kubectl(
        tmp_path,
        monkeypatch,
        "error: error upgrading connection: unable to upgrade connection: "
        "<!DOCTYPE HTML PUBLIC><html><head><title>404</title></head><body>\x1b[2J</body></html>",
        code=1,
    )
    code, _, err = ddpjob(capsys, "tensorboard", "hello", "--via", "port-forward")
    assert code == 1 and err.strip().splitlines() == [
        "error: kubectl port-forward ended: error upgrading connection: unable to upgrade connection"
    ]


class FakeBrowser:
    def __init__(self, name: str, opens: bool = True):
        self.name, self.opens = name, opens
        self.opened: list[str] = []

    def open(self, url: str) -> bool:
        self.opened.append(url)
        return self.opens


def test_open_says_whether_a_browser_opened_the_page(monkeypatch) -> None:
    """`--open` on a machine with no browser opened nothing and said nothing."""
    import webbrowser

    from ddpjob.cli.tensorboard import open_in_browser

    def none() -> None:
        raise webbrowser.Error("could not locate runnable browser")

    monkeypatch.setattr("webbrowser.get", none)
    assert open_in_browser("http://127.0.0.1:1/") == (
        False,
        "no web browser found here (no display, no $BROWSER): open the URL above in one",
    )
    text_only = FakeBrowser("lynx")
    monkeypatch.setattr("webbrowser.get", lambda: text_only)
    assert open_in_browser("http://127.0.0.1:1/") == (
        False,
        "the only web browser here is lynx, a text one: open the URL above in another",
    )
    assert text_only.opened == []  # it would have taken over the terminal
    monkeypatch.setattr("webbrowser.get", lambda: FakeBrowser("xdg-open", opens=False))
    assert open_in_browser("http://127.0.0.1:1/") == (
        False,
        "the web browser (xdg-open) did not open it: open the URL above yourself",
    )


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "kill"])
def test_ctrl_c_or_kill_stops_kubectl_too_even_when_started_with_sigint_ignored(
    cluster, tmp_path, monkeypatch, signum
) -> None:
    # As a shell starts a background job (`ddpjob tensorboard x &`): SIGINT ignored, which
    # Python keeps unless the command installs its own handler.
    make_job(cluster, BOARD, **ON)
    pid_file = tmp_path / "kubectl.pid"
    fake_kubectl(tmp_path, monkeypatch, "Forwarding from 127.0.0.1:41234 -> 6006")
    script = tmp_path / "bin" / "kubectl"
    # Its pid written before it says "Forwarding", so the file is there once the URL is.
    pid_line = f"import os, time, pathlib; pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid()))\n"
    script.write_text(
        script.read_text().replace("print(", pid_line + "print(", 1).replace("sys.exit(", "time.sleep(50); sys.exit(")
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "ddpjob.cli", "tensorboard", "hello"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    assert proc.stdout is not None and proc.stderr is not None  # both PIPE
    try:
        assert "http://127.0.0.1:41234/" in proc.stdout.readline()
        kubectl_pid = int(pid_file.read_text())
        proc.send_signal(signum)
        assert proc.wait(30) == 130, proc.stderr.read()
        with pytest.raises(ProcessLookupError):  # stopped and reaped by the command
            os.kill(kubectl_pid, 0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if pid_file.exists():  # a failed run's kubectl must not outlive the test
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
