"""The real-cluster test (hack/e2e-kind.sh, also `make e2e-kind`) as a pytest test.

Skipped, with the reason, where docker (with a running daemon), kind, kubectl or helm is
missing. It takes 10-30 minutes (two image builds, a kind cluster, two training jobs);
deselect it with `-m "not e2e"`.
"""
from __future__ import annotations

import os
import subprocess

import pytest

from tests.deploy.deploy_helpers import ROOT, _TOOL_DIRS, find_tool

pytestmark = pytest.mark.e2e


def missing_prerequisite() -> str | None:
    for tool, why in (('docker', 'builds the images'), ('kind', 'runs the cluster'),
                      ('kubectl', 'comes with the test extra'), ('helm', 'run `make tools`')):
        if find_tool(tool) is None:
            return f'{tool} is not installed ({why}); the kind e2e test needs docker, kind, kubectl and helm'
    info = subprocess.run([find_tool('docker'), 'info'], capture_output=True, text=True, timeout=30)
    if info.returncode != 0:
        return f'docker is installed but its daemon is not reachable: {info.stderr.strip().splitlines()[-1:]}'
    return None


@pytest.mark.timeout(3600)
def test_kind_end_to_end() -> None:
    reason = missing_prerequisite()
    if reason:
        print(f'SKIP: {reason}')
        pytest.skip(reason)
    env = {**os.environ, 'PATH': os.pathsep.join([*map(str, _TOOL_DIRS), os.environ.get('PATH', '')])}
    # Output streams straight to the terminal (pytest -s) or into the captured log.
    done = subprocess.run([str(ROOT / 'hack' / 'e2e-kind.sh')], cwd=ROOT, env=env, timeout=3500)
    assert done.returncode == 0, 'hack/e2e-kind.sh failed: see its diagnostics above'
