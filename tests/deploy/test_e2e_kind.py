"""The real-Pods test (hack/e2e-kind.sh, also `make e2e-kind`) as a pytest test.

It runs wherever a container engine can be had: a docker that answers, or, as root on
Debian with a Go toolchain (kind and the node image), the engine hack/engine.sh unpacks
from Debian's packages and starts on its own socket (stopped again when the test ends).
Skipped, with the reason, only where neither can be had, or kubectl or helm is missing. It
takes 10-40 minutes (two images, a node image, a kind cluster, five scenarios); deselect it
with `-m "not e2e"`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from ddpjob.local.ownership import stop_with_parent
from tests.deploy.deploy_helpers import _TOOL_DIRS, ROOT, find_tool

pytestmark = pytest.mark.e2e


def missing_prerequisite() -> str | None:
    for tool, why in (("kubectl", "comes with the test extra"), ("helm", "run `make tools`")):
        if find_tool(tool) is None:
            return f"{tool} is not installed ({why}); the kind e2e test needs kubectl and helm"
    status = subprocess.run(
        [str(ROOT / "hack" / "engine.sh"), "status"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PY": sys.executable},
    )
    if "answers: it is used" in status.stdout:
        return None
    if os.geteuid() != 0:
        return "no docker answers, and starting the project's own engine needs root"
    if shutil.which("apt-get") is None:
        return "no docker answers, and the project's own engine comes from Debian's packages (no apt-get)"
    if shutil.which("go") is None:
        return "kind and the node image are built from Go modules, and no `go` is on PATH"
    return None


@pytest.mark.timeout(5400)
def test_kind_end_to_end() -> None:
    reason = missing_prerequisite()
    if reason:
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    path = os.pathsep.join([*map(str, _TOOL_DIRS), os.environ.get("PATH", "")])
    env = {**os.environ, "PATH": path, "PY": sys.executable}
    # Output streams straight to the terminal (pytest -s) or into the captured log.
    done = subprocess.run(
        [str(ROOT / "hack" / "engine.sh"), "run", "--", str(ROOT / "hack" / "e2e-kind.sh")],
        cwd=ROOT,
        env=env,
        timeout=5300,
        # A pytest killed outright (a SIGTERM runs no finally) takes the tier with it: its
        # cluster deleted, its engine stopped, instead of a run left holding the engine.
        preexec_fn=stop_with_parent,
    )
    assert done.returncode == 0, "hack/e2e-kind.sh failed: see its diagnostics above"
