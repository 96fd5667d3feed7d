"""Which kubectl (cluster/kubectl.py): the one on PATH, else the one beside this Python;
the product, the development cluster and the tests all ask here."""

from __future__ import annotations

import os
import pathlib
import sys

import pytest

from ddpjob.cluster import kubectl
from ddpjob.cluster.connection import ClusterError


def executable(folder: pathlib.Path) -> pathlib.Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "kubectl"
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_path_first_then_beside_this_python(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on_path, beside = executable(tmp_path / "bin"), executable(tmp_path / "venv")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "venv" / "python"))
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}/nowhere")
    assert kubectl.locate() == str(on_path)
    monkeypatch.setenv("PATH", "/nowhere")
    assert kubectl.locate() == kubectl.find() == str(beside)


def test_none_anywhere_is_one_line_saying_where_it_looked(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "venv" / "python"))
    monkeypatch.setenv("PATH", "/nowhere")
    assert kubectl.locate() is None
    with pytest.raises(
        ClusterError,
        match=f"^kubectl is not installed \\(looked on PATH and in {tmp_path}/venv\\): it forwards the port$",
    ):
        kubectl.find(": it forwards the port")


def test_the_tests_and_the_development_cluster_ask_here() -> None:
    """One way to find kubectl: no other module looks for it on its own."""
    root = pathlib.Path(__file__).resolve().parents[2]
    lookers = sorted(
        str(p.relative_to(root))
        for folder in ("operator", "tests", "benchmarks", "hack")
        for p in (root / folder).rglob("*.py")
        if any(needle in p.read_text() for needle in ('which("kubectl"', "which('kubectl'"))
        and p.name not in ("kubectl.py", "test_kubectl.py")
    )
    assert lookers == []
