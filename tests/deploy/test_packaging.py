"""One distribution, two packages: each side imports without the other's heavy parts,
and the wheel the images install carries the templates."""

import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def import_without(blocked: list[str], modules: list[str]) -> subprocess.CompletedProcess:
    # A None entry in sys.modules makes `import X` raise ImportError, as if X were not installed.
    code = "import sys\n" + "".join(f"sys.modules[{b!r}] = None\n" for b in blocked)
    code += "".join(f"import {m}\n" for m in modules)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_the_operator_side_needs_no_torch():
    result = import_without(
        ["torch", "torchvision", "tqdm"],
        ["ddpjob.cli", "ddpjob.local.runner", "ddpjob.operator.handlers", "ddpjob.operator.main"],
    )
    assert result.returncode == 0, result.stderr


def test_the_trainer_side_needs_no_kopf():
    # prometheus_client is a trainer dependency too (ddpjob-launch serves /metrics).
    result = import_without(
        ["kopf", "kubernetes", "jinja2", "yaml"],
        ["ddpjob_trainer.launch", "ddpjob_trainer.progress_server", "ddpjob_trainer.train"],
    )
    assert result.returncode == 0, result.stderr


def test_the_block_is_real():
    assert import_without(["torch"], ["ddpjob_trainer.train"]).returncode != 0


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out, src = tmp_path_factory.mktemp("wheel"), tmp_path_factory.mktemp("src")
    # Built from a clean copy of what the wheel is made of: a build/ folder left in the
    # checkout would carry files the package list no longer names.
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    for folder in ("operator", "trainer_image"):
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    (found,) = out.glob("ddpjob-*.whl")
    return found


def source_packages() -> list[str]:
    """Every package of the three source folders (a folder with an __init__.py)."""
    out = []
    for base in (ROOT / "operator", ROOT / "trainer_image"):
        for init in sorted(base.glob("ddpjob*/**/__init__.py")):
            out.append(".".join(init.parent.relative_to(base).parts))
    return out


def test_the_installed_wheel_imports_every_package(wheel, tmp_path):
    """Installed alone (no source tree, no editable install), every package and subpackage
    imports from the wheel: a package left out of pyproject's list fails here."""
    env = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env)
    python = env / "bin" / "python"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr
    # The third-party dependencies come from this environment's site-packages, added as a
    # plain path (its .pth files, the editable install's among them, are not run).
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    packages = source_packages()
    assert {"ddpjob.operator", "ddpjob_devcluster.controlplane", "ddpjob_trainer"} <= set(packages)
    code = (
        "import importlib, sys\n"
        f"for name in {packages!r}:\n"
        "    module = importlib.import_module(name)\n"
        f"    assert module.__file__.startswith({site!r}), (name, module.__file__)\n"
    )
    result = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr


def test_the_wheel_carries_both_packages_and_the_templates(wheel):
    files = set(zipfile.ZipFile(wheel).namelist())
    assert {
        "ddpjob/render/templates/pod.yaml.j2",
        "ddpjob/render/templates/service.yaml.j2",
        "ddpjob/render/objects.py",
        "ddpjob_trainer/launch.py",
        "ddpjob/api/template_types.json",
    } <= files  # a template's types, read at run time
    entry_points = next(f for f in files if f.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    for script in (
        "ddpjob = ddpjob.cli:main",
        "ddpjob-launch = ddpjob_trainer.launch:main",
        "ddpjob-train = ddpjob_trainer.train:main",
    ):
        assert script in text
