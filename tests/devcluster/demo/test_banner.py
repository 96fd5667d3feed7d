"""The demo cluster's "in another terminal" lines work as pasted in another terminal: one
whose directory is elsewhere and whose PATH has neither this checkout's `ddpjob` nor its
`kubectl` (the machine's own kubectl may be of a minor version outside the server's skew)."""

from __future__ import annotations

import os
import pathlib
import shlex
import subprocess
import types

from ddpjob_devcluster.clusters.client import BIN, ClusterClient
from ddpjob_devcluster.demo import main as demo


def banner(tmp_path: pathlib.Path) -> str:
    cluster = types.SimpleNamespace(
        kubeconfig=tmp_path / "kubeconfig",
        workdir=tmp_path,
        kubectl_path=ClusterClient.kubectl_path,
        plane=types.SimpleNamespace(server="https://127.0.0.1:6443"),
        agents=[types.SimpleNamespace(name="cpu-0")],
        operator=types.SimpleNamespace(pid=1, log_path=tmp_path / "operator.log"),
    )
    return demo.instructions(cluster)  # type: ignore[arg-type]


def pasted_lines(text: str) -> list[list[str]]:
    return [shlex.split(line, comments=True) for line in text.splitlines() if line.startswith("    ")]


def test_every_pasted_line_names_its_programs_and_files_by_absolute_path(tmp_path: pathlib.Path) -> None:
    lines = pasted_lines(banner(tmp_path))
    assert lines[0] == ["export", f"KUBECONFIG={tmp_path / 'kubeconfig'}"]
    programs = {words[0] for words in lines[1:]}
    # This checkout's ddpjob and the kubectl beside it (the server's minor), nothing from PATH.
    assert programs <= {str(BIN.absolute() / "ddpjob"), str(BIN.absolute() / "kubectl")}, programs
    assert len(programs) == 2, programs
    files = [w for words in lines for w in words if w.endswith(".yaml")]
    assert files and all(os.path.isabs(f) and os.path.isfile(f) for f in files), files


def test_the_programs_run_from_another_directory_without_the_venv_on_path(tmp_path: pathlib.Path) -> None:
    lines = pasted_lines(banner(tmp_path))
    elsewhere = tmp_path / "another-terminal"
    elsewhere.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    for program in sorted({words[0] for words in lines[1:]}):
        check = [program, "--version"] if program.endswith("ddpjob") else [program, "version", "--client"]
        done = subprocess.run(check, cwd=elsewhere, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, (check, done.stderr)
