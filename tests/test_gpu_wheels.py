"""The GPU tier on a GPU machine with no package index (`make gpu-wheels`, then
`make test-gpu WHEELS=DIR`): the wheel list (hack/gpu-wheels.txt) covers what the GPU tier,
the trainer's tests, the trainer and the GPU benchmarks import there, and the offline
venv (hack/gpu-venv.sh) refuses what it cannot use, in one line, before changing anything.

The imports are read statically (every `import`, at any depth) from the files that run on
that machine; tests/conftest.py and its plugins at module level only, since what they
import inside a fixture runs only for the control plane's tests.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WHEEL_LIST = ROOT / "hack" / "gpu-wheels.txt"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
FIRST_PARTY = {"ddpjob", "ddpjob_trainer", "ddpjob_devcluster", "tests"}
MACHINES_OWN = {"torch", "torchvision"}  # the GPU machine's CUDA build, never in the list
# pyproject's pytest options that a plugin defines: without it pytest warns or ignores them.
INI_PLUGINS = {"timeout": "pytest-timeout"}


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    name = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert name is not None, requirement
    return normal(name.group(0))


def listed() -> set[str]:
    lines = (line.split("#", 1)[0].strip() for line in WHEEL_LIST.read_text().splitlines())
    return {requirement_name(line) for line in lines if line}


def sources() -> dict[Path, bool]:
    """Each file that runs on the GPU machine -> whether its lazy imports count too."""
    files = {p: True for d in ("tests/gpu", "tests/trainer", "trainer_image") for p in (ROOT / d).rglob("*.py")}
    files.update({ROOT / "benchmarks" / name: True for name in ("trainer_vs_seed.py", "resnet_imagefolder.py")})
    conftest = ROOT / "tests" / "conftest.py"
    files[conftest] = False
    plugins = next(
        node.value
        for node in ast.parse(conftest.read_text()).body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "pytest_plugins"
    )
    assert isinstance(plugins, ast.List | ast.Tuple), "pytest_plugins is not a list"
    names = [p.value for p in plugins.elts if isinstance(p, ast.Constant) and isinstance(p.value, str)]
    assert len(names) == len(plugins.elts), "pytest_plugins names a plugin by other than a string"
    files.update({ROOT / Path(*name.split(".")).with_suffix(".py"): False for name in names})
    return files


def third_party(path: Path, source: str, lazy_too: bool) -> set[str]:
    """The top-level names the file imports that are neither stdlib, first-party nor a sibling."""
    tree = ast.parse(source)
    nodes = ast.walk(tree) if lazy_too else iter(tree.body)
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            names.add(node.module.split(".")[0])
    siblings = {p.stem for p in path.parent.glob("*.py")}
    return names - set(sys.stdlib_module_names) - FIRST_PARTY - siblings - {"__future__"}


def missing(imported: dict[str, set[str]]) -> list[str]:
    """What each file (by name) imports that the list lacks, as 'file: module (distribution)'."""
    distributions = importlib.metadata.packages_distributions()
    have = listed()
    out = []
    for name, modules in sorted(imported.items()):
        for module in sorted(modules - MACHINES_OWN):
            dists = {normal(d) for d in distributions.get(module, [])}
            if not dists & have:
                out.append(f"{name}: {module} ({', '.join(sorted(dists)) or 'not installed here'})")
    return out


def test_the_wheel_list_covers_every_import_of_the_gpu_tier() -> None:
    imported = {
        str(path.relative_to(ROOT)): third_party(path, path.read_text(), lazy_too)
        for path, lazy_too in sources().items()
    }
    assert imported and all(name in imported for name in ("tests/conftest.py", "tests/support/control_plane.py"))
    assert not missing(imported), (
        "add these to hack/gpu-wheels.txt (the GPU machine installs nothing else "
        "beyond its torch):\n" + "\n".join(missing(imported))
    )


def test_a_new_import_would_be_caught() -> None:
    new = ROOT / "tests" / "trainer" / "test_new.py"
    source = "import yaml\nimport torch\nfrom trainer_helpers import BIN\ndef f():\n    import jsonschema\n"
    assert missing({"test_new.py": third_party(new, source, lazy_too=True)}) == ["test_new.py: jsonschema (jsonschema)"]
    # conftest's lazy imports (the control plane's kubernetes) are not the GPU tier's.
    conftest = ROOT / "tests" / "conftest.py"
    assert third_party(conftest, "def f():\n    import kubernetes\n", lazy_too=False) == set()
    assert third_party(conftest, "import kubernetes\n", lazy_too=False) == {"kubernetes"}


def test_the_list_has_ddpjobs_core_the_trainers_extra_and_the_pytest_plugins() -> None:
    needed = {requirement_name(r) for r in PYPROJECT["project"]["dependencies"]}
    needed |= {requirement_name(r) for r in PYPROJECT["project"]["optional-dependencies"]["trainer"]}
    needed |= {plugin for option, plugin in INI_PLUGINS.items() if option in PYPROJECT["tool"]["pytest"]["ini_options"]}
    needed |= {"pytest"}
    assert needed - MACHINES_OWN <= listed(), sorted(needed - MACHINES_OWN - listed())


def test_the_list_leaves_out_the_machines_torch_and_the_operators_dependencies() -> None:
    operator = {requirement_name(r) for r in PYPROJECT["project"]["optional-dependencies"]["operator"]}
    # prometheus-client is the trainer's too (ddpjob-launch's /metrics).
    trainer = {requirement_name(r) for r in PYPROJECT["project"]["optional-dependencies"]["trainer"]}
    unwanted = MACHINES_OWN | {"triton"} | (operator - trainer)
    assert not (listed() & unwanted), sorted(listed() & unwanted)
    assert not any(name.startswith(("nvidia-", "cuda-")) for name in listed())


def gpu_venv(tmp_path: Path, python: Path | str, wheels: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(ROOT / "hack" / "gpu-venv.sh"), str(python), str(wheels), str(tmp_path / "venv")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )


def test_the_offline_venv_refuses_a_python_without_torch_in_one_line(tmp_path: Path) -> None:
    no_site = tmp_path / "python-without-torch"  # this interpreter with no site-packages
    no_site.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    no_site.chmod(0o755)
    r = gpu_venv(tmp_path, no_site, tmp_path)
    assert r.returncode != 0 and r.stdout == "", r
    assert r.stderr.count("\n") == 1 and f"torch is not installed in PYTHON={no_site}" in r.stderr, r.stderr
    assert not (tmp_path / "venv").exists()


@pytest.mark.skipif(importlib.util.find_spec("torchvision") is None, reason="torchvision is not installed here")
def test_the_offline_venv_refuses_a_wheel_directory_without_ddpjob(tmp_path: Path) -> None:
    (tmp_path / "pip-1.0-py3-none-any.whl").write_text("")
    r = gpu_venv(tmp_path, sys.executable, tmp_path)
    assert r.returncode != 0 and r.stderr.count("\n") == 1, r
    assert f"no ddpjob wheel in {tmp_path}" in r.stderr and "make gpu-wheels" in r.stderr, r.stderr
    assert not (tmp_path / "venv").exists()


def test_make_test_gpu_with_wheels_never_builds_dot_venv_nor_asks_an_index(tmp_path: Path) -> None:
    """The offline recipe, as make would run it: .venv-gpu's Python, no pip from constraints.txt."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    dry = subprocess.run(
        ["make", "-n", "test-gpu", f"WHEELS={tmp_path}", "PYTHON=/opt/gpu/bin/python"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert dry.returncode == 0, dry.stderr
    assert f'hack/gpu-venv.sh "/opt/gpu/bin/python" "{tmp_path}" .venv-gpu' in dry.stdout, dry.stdout
    assert ".venv-gpu/bin/python -m pytest" in dry.stdout and "tests/gpu tests/trainer" in dry.stdout
    assert "constraints.txt" not in dry.stdout and "-m venv .venv" not in dry.stdout, dry.stdout
    script = (ROOT / "hack" / "gpu-venv.sh").read_text()
    installs = [line for line in script.splitlines() if re.search(r"pip\S* install ", line)]
    assert installs and all("--no-index" in line for line in installs), installs
