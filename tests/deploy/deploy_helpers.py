"""Shared by the chart, manifest, Dockerfile and RBAC tests: paths, tools, rendering."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
from typing import Any

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "ddpjob-operator"
CRD_DIR = ROOT / "manifests" / "crd"
BASE = ROOT / "manifests" / "base"
DOCKERFILE = ROOT / "Dockerfile"

# The Makefile puts these first on PATH; looking here too lets `pytest tests/deploy`
# work without make.
_TOOL_DIRS = [ROOT / ".tools" / "bin", ROOT / ".venv" / "bin"]

# The values file that turns the chart namespace-scoped.
NAMESPACE_VALUES = {"watch": {"scope": "namespace", "namespace": "team-a"}}
RELEASE, RELEASE_NS = "ddpjob", "ddpjob-system"


def find_tool(name: str) -> str | None:
    path = os.pathsep.join([os.environ.get("PATH", ""), *map(str, _TOOL_DIRS)])
    return shutil.which(name, path=path)


def require_tool(name: str, how: str) -> str:
    tool = find_tool(name)
    if tool is None:
        pytest.skip(f"{name} not found on PATH or in .tools/bin, .venv/bin: {how}")
    return tool


def run(cmd: list[str], *, check: bool = True, timeout: float = 60, **kw: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check and done.returncode != 0:
        raise AssertionError(f"{cmd} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


# The PATH a script of hack/ runs under in these tests: the system's tools only, so a stub
# defined in the script (docker, k, df) is what answers, never a real engine or cluster.
BARE_PATH = "/usr/bin:/bin"


def run_bash(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    """SCRIPT under bash in the repository root, with BARE_PATH and ENV only; never raises on
    its exit status (the tests read it)."""
    return subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT, env={"PATH": BARE_PATH, **env}
    )


def bash_functions(script: pathlib.Path, first: str, last: str | None = None) -> str:
    """The text of SCRIPT's functions from FIRST through LAST (FIRST alone without it), as
    they stand there, to be run with stubs for what they call."""
    text = script.read_text()
    start = text.index(f"{first}() {{")
    end = text.index("\n}\n", text.index(f"{last or first}() {{"))
    return text[start : end + 3]


def helm_template_run(
    helm: str,
    tmp_path: pathlib.Path,
    values: dict | None = None,
    *,
    release: str = RELEASE,
    include_crds: bool = False,
    check: bool = True,
    chart: pathlib.Path = CHART,
) -> subprocess.CompletedProcess[str]:
    """The `helm template` process (check=False: a failure is returned, not raised)."""
    cmd = [helm, "template", release, str(chart), "--namespace", RELEASE_NS]
    if values is not None:
        vfile = tmp_path / f"values-{len(list(tmp_path.glob('values-*.yaml')))}.yaml"
        vfile.write_text(yaml.safe_dump(values))
        cmd += ["--values", str(vfile)]
    if include_crds:
        cmd.append("--include-crds")
    return run(cmd, check=check)


def helm_template(
    helm: str,
    tmp_path: pathlib.Path,
    values: dict | None = None,
    *,
    release: str = RELEASE,
    include_crds: bool = False,
    chart: pathlib.Path = CHART,
) -> list[dict[str, Any]]:
    """The objects `helm template` renders."""
    done = helm_template_run(helm, tmp_path, values, release=release, include_crds=include_crds, chart=chart)
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def operator_objects(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chart's objects less the ClusterRoles it aggregates into the default
    admin/edit/view roles: those are users' grants, not the operator's."""

    def aggregated(o: dict[str, Any]) -> bool:
        labels = (o.get("metadata") or {}).get("labels") or {}
        return o["kind"] == "ClusterRole" and any(
            k.startswith("rbac.authorization.k8s.io/aggregate-to-") for k in labels
        )

    return [o for o in objects if not aggregated(o)]


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = by_kind(objects, kind)
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def crd_copy_differences(source_dir: pathlib.Path, copy_dir: pathlib.Path) -> list[str]:
    """What differs between manifests/crd/ and a copy of it (byte for byte, file for file)."""
    src = {p.name: p.read_bytes() for p in sorted(source_dir.glob("*.yaml"))}
    dst = {p.name: p.read_bytes() for p in sorted(copy_dir.glob("*.yaml"))}
    problems = [f"{n}: missing from {copy_dir}" for n in src.keys() - dst.keys()]
    problems += [f"{n}: in {copy_dir} but not in {source_dir}" for n in dst.keys() - src.keys()]
    problems += [f"{n}: differs from {source_dir / n}" for n in src.keys() & dst.keys() if src[n] != dst[n]]
    return sorted(problems)


# RBAC: rules flattened to (apiGroup, resource, verb) triples. A rule limited by name (the
# leader election's Lease) counts for its triples: the names are the API server's to check
# (tests/system/test_leader_election_real.py runs the operator with these rules).
def rule_triples(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    out = set()
    for rule in rules:
        assert not rule.get("nonResourceURLs"), rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    assert "*" not in (group, resource, verb), f"wildcard in {rule}"
                    out.add((group, resource, verb))
    return out
