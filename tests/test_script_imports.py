"""The benchmarks and hack scripts import the project as it is now: no test imports them
(they run by hand or under `make bench`), so a moved module would break them unseen
(benchmarks/pod_startup.py still named `ddpjob_devcluster.cluster` after the dev cluster
moved into rooms)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIRST_PARTY = ("ddpjob", "ddpjob_devcluster", "ddpjob_trainer")
SCRIPTS = sorted([*(ROOT / "benchmarks").glob("*.py"), *(ROOT / "hack").rglob("*.py")])


def first_party_imports(tree: ast.AST) -> list[tuple[str, str | None]]:
    """(module, name) for every absolute import of the project, at any depth (lazy ones too)."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names if a.name.split(".")[0] in FIRST_PARTY]
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in FIRST_PARTY:
            found += [(node.module or "", a.name) for a in node.names]
    return found


def unresolved(module: str, name: str | None) -> str | None:
    if importlib.util.find_spec(module) is None:
        return f"no module {module}"
    if name is None or name == "*":
        return None
    if hasattr(importlib.import_module(module), name):
        return None
    if importlib.util.find_spec(f"{module}.{name}") is not None:
        return None
    return f"{module} has no {name}"


def test_the_check_finds_a_moved_module() -> None:
    tree = ast.parse("from ddpjob_devcluster.cluster import wait_until\nfrom ddpjob.api import nothing_here\n")
    problems = [unresolved(m, n) for m, n in first_party_imports(tree)]
    assert problems == ["no module ddpjob_devcluster.cluster", "ddpjob.api has no nothing_here"]


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_project_import_resolves(path: pathlib.Path) -> None:
    problems = [p for m, n in first_party_imports(ast.parse(path.read_text())) if (p := unresolved(m, n))]
    assert problems == [], f"{path.relative_to(ROOT)}: {problems}"
