"""One version, one place: operator/ddpjob/version.py. Every other place that names the
release agrees with it (hack/set_version.py --check), the check catches drift, the
rewrite moves every place together, and both commands print it."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from ddpjob import version
from tests.deploy.deploy_helpers import CHART, DOCKERFILE, ROOT

spec = importlib.util.spec_from_file_location("set_version", ROOT / "hack" / "set_version.py")
assert spec is not None and spec.loader is not None
set_version = importlib.util.module_from_spec(spec)
spec.loader.exec_module(set_version)


def test_every_place_names_the_one_version() -> None:
    assert set_version.check(ROOT) == []


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the repository to break and rewrite."""
    dst = tmp_path / "repo"
    shutil.copytree(
        ROOT,
        dst,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", ".tools", "__pycache__", "*.egg-info", ".ddpjob", "build", "dist"
        ),
    )
    return dst


def test_the_check_names_each_place_that_drifted(tree: Path) -> None:
    v = version.__version__
    chart = tree / "charts/ddpjob-operator/Chart.yaml"
    chart.write_text(chart.read_text().replace(f'appVersion: "{v}"', 'appVersion: "9.9.9"'))
    example = tree / "manifests/examples/mnist-cpu.yaml"
    example.write_text(example.read_text().replace(f"ddpjob/trainer:{v}-cpu", "ddpjob/trainer:0.0.1-cpu"))
    values = tree / "charts/ddpjob-operator/values.yaml"
    cuda = version.trainer_tag("cuda")
    values.write_text(values.read_text().replace(cuda, cuda.replace("torch", "torch9")))
    problems = set_version.check(tree)
    assert len(problems) == 3, problems
    assert problems[0] == f"charts/ddpjob-operator/Chart.yaml: the chart's appVersion is 9.9.9, not {v}"
    assert any(p.startswith("manifests/examples/mnist-cpu.yaml:") and "0.0.1-cpu" in p for p in problems)
    assert any(p.startswith("charts/ddpjob-operator/values.yaml:") for p in problems)
    # A release tag that differs from the files is refused too.
    assert set_version.check(ROOT, expect="9.9.9") == [
        f"operator/ddpjob/version.py: __version__ is {v}, expected 9.9.9"
    ]


def test_set_version_moves_every_place_together(tree: Path) -> None:
    changed = {p.relative_to(tree).as_posix() for p in set_version.set_version("7.8.9", tree)}
    assert {
        "operator/ddpjob/version.py",
        "charts/ddpjob-operator/Chart.yaml",
        "charts/ddpjob-operator/values.yaml",
        "manifests/examples/mnist-cpu.yaml",
        "manifests/base/kustomization.yaml",
        "Dockerfile",
        "README.md",
        "hack/e2e-kind.sh",
    } <= changed
    assert set_version.check(tree) == []
    assert set_version.check(tree, expect="7.8.9") == []
    chart = yaml.safe_load((tree / "charts/ddpjob-operator/Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == "7.8.9"
    assert "image: ddpjob/trainer:7.8.9-cpu" in (tree / "manifests/examples/mnist-cpu.yaml").read_text()
    assert f"ddpjob/trainer:7.8.9-{version.cuda_variant()}" in (tree / "charts/ddpjob-operator/values.yaml").read_text()
    with pytest.raises(ValueError, match="not a version"):
        set_version.set_version("v1", tree)


def test_the_package_version_is_read_from_version_py() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "ddpjob.version.__version__"}
    assert project["project"]["license"] == "Apache-2.0" and project["project"]["license-files"] == ["LICENSE"]


def test_image_tags_name_cuda_and_torch() -> None:
    major, minor = version.CUDA_VERSION.split(".")
    torch_mm = ".".join(version.TORCH_VERSION.split(".")[:2])
    assert version.trainer_tag("cuda", "0.2.0") == f"0.2.0-cu{major}{minor}-torch{torch_mm}"
    assert version.trainer_tag("cpu", "0.2.0") == "0.2.0-cpu"
    assert re.fullmatch(r"0\.2\.0-cu\d{3}-torch\d+\.\d+", version.trainer_tag("cuda", "0.2.0"))
    assert version.image_tags("1.0.0") == {
        "operator": "ddpjob/operator:1.0.0",
        "trainer-cpu": "ddpjob/trainer:1.0.0-cpu",
        "trainer-cuda": f"ddpjob/trainer:1.0.0-{version.cuda_variant()}",
    }
    with pytest.raises(ValueError, match="variant"):
        version.trainer_tag("rocm")


def test_the_cuda_tag_names_what_the_image_is_built_from() -> None:
    args = dict(re.findall(r"^ARG (\w+)=(\S+)", DOCKERFILE.read_text(), re.M))
    assert args["CUDA_BASE_IMAGE"].startswith(f"pytorch/pytorch:{version.TORCH_VERSION}-cuda{version.CUDA_VERSION}-")
    assert args["TORCH_VERSION"] == version.TORCH_VERSION
    # pyproject.toml holds a compatible range; the exact version the images install is
    # constraints.txt's.
    pins = (ROOT / "constraints.txt").read_text().splitlines()
    assert f"torch=={version.TORCH_VERSION}" in pins


@pytest.mark.parametrize(
    "argv",
    [["-m", "ddpjob.cli", "--version"], ["-m", "ddpjob_trainer.launch", "--version"]],
    ids=["ddpjob", "ddpjob-launch"],
)
def test_both_commands_print_the_version(argv: list[str]) -> None:
    done = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith(f" {version.__version__}")


def test_python_m_ddpjob_version_prints_each_image() -> None:
    for build, image in version.image_tags().items():
        done = subprocess.run(
            [sys.executable, "-m", "ddpjob.version", build], capture_output=True, text=True, timeout=60
        )
        assert (done.returncode, done.stdout.strip()) == (0, image)
    done = subprocess.run([sys.executable, "-m", "ddpjob.version", "nope"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "nope" in done.stderr and "Traceback" not in done.stderr


def test_the_chart_names_the_version_and_licence() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == version.__version__
    assert chart["annotations"]["artifacthub.io/license"] == "Apache-2.0"
    images = {i["name"]: i["image"] for i in yaml.safe_load(chart["annotations"]["artifacthub.io/images"])}
    assert set(images.values()) == set(version.image_tags().values())
