"""Fixtures shared by every suite: the real control plane's (tests/support/control_plane.py,
gang_crds.py), a small valid job body, the examples, and kubectl's cache kept out of the
user's home."""

import copy
import os
from pathlib import Path

import pytest
import yaml

pytest_plugins = ["tests.support.control_plane", "tests.support.gang_crds", "tests.support.cpu_time"]

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "manifests" / "examples"


@pytest.fixture(scope="session", autouse=True)
def kube_cache(tmp_path_factory):
    """kubectl and helm keep discovery and HTTP caches under KUBECACHEDIR (default
    ~/.kube/cache), a folder per server address: the suite's clusters, each on a port of its
    own, left hundreds in the user's home. They go to the session's folder instead."""
    old = os.environ.get("KUBECACHEDIR")
    os.environ["KUBECACHEDIR"] = str(tmp_path_factory.mktemp("kube-cache"))
    yield
    if old is None:
        os.environ.pop("KUBECACHEDIR", None)
    else:
        os.environ["KUBECACHEDIR"] = old


@pytest.fixture
def job_body():
    """A small valid job; tests copy and change it."""

    def make(**spec):
        body = {
            "apiVersion": "ddpjob.io/v1alpha1",
            "kind": "DDPJob",
            "metadata": {
                "name": "demo",
                "namespace": "ml",
                "uid": "0d1c2b3a-0000-4000-8000-000000000001",
                "generation": 1,
            },
            "spec": {
                "nodes": 2,
                "nprocPerNode": 2,
                "image": "ddpjob/trainer:0.1.0",
                "command": ["ddpjob-launch"],
                "args": ["ddpjob-train", "--epochs", "1"],
            },
        }
        body["spec"].update(spec)
        return copy.deepcopy(body)

    return make


def load_example(name: str) -> dict:
    return yaml.safe_load((EXAMPLES / name).read_text())


def project_crd() -> dict:
    """The DDPJob CRD from its single source (manifests/crd/)."""
    return yaml.safe_load((ROOT / "manifests" / "crd" / "ddpjobs.ddpjob.io.yaml").read_text())
