"""Every repository path the docs (*.md), the Makefile and the scripts under hack/ name exists,
and every section of a doc they name by its title (`docs/development.md, "Real-cluster test"`,
`the README's 'Real-cluster test' section`).

A path is "clearly the repository's" when its first folder is one of the project's
(FOLDERS) and it has a slash: `tests/local/scripts/allreduce_probe.py`, `hack/upstream/*/go.mod`
(a glob: at least one match). One with a placeholder (`<name>`, `$VAR`, `{a,b}`, `~`) is
not checked, nor a URL. The docs also name modules from their package's folder
(`operator/notices.py` for operator/ddpjob/operator/notices.py): those are looked up under
the package roots too. Relative links and their headings are test_readme.py's.
"""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
FOLDERS = {"operator", "trainer_image", "tests", "docs", "hack", "charts", "manifests", "benchmarks", ".github", ".ci"}
PACKAGE_ROOTS = (ROOT, ROOT / "operator", ROOT / "operator" / "ddpjob", ROOT / "trainer_image")
NOT_THE_PROJECTS = {".git", ".venv", ".tools", ".mypy_cache", ".ruff_cache", ".pytest_cache", "node_modules"}
# Paths named on purpose that are not in the repository, each with why.
EXCEPTIONS: dict[str, str] = {}
# CHANGELOG.md is history: it names what was, the files removed since included.
NOT_CHECKED = {"CHANGELOG.md"}

TOKEN = re.compile(r"[\w.@*<>{}$~/:#-]+")
SECTION = re.compile(r"(?P<doc>\bREADME|[\w./-]+\.md)(?:'s)?,? (?P<q>[\"'])(?P<title>[^\"'\n]{3,80})(?P=q)")


def sources() -> list[pathlib.Path]:
    docs = [
        p
        for p in ROOT.rglob("*.md")
        if not NOT_THE_PROJECTS & set(p.relative_to(ROOT).parts) and p.name not in NOT_CHECKED
    ]
    scripts = [p for p in (ROOT / "hack").rglob("*") if p.is_file() and p.name != "go.sum"]
    return sorted([*docs, ROOT / "Makefile", *scripts])


def named_paths(text: str) -> list[str]:
    """The repository paths a text names (placeholders and URLs left out)."""
    found = []
    for match in TOKEN.finditer(text):
        token = match.group(0).split("#", 1)[0].split("::", 1)[0].rstrip(".,:;")
        token = token.removeprefix("./")
        if "/" not in token or token.split("/", 1)[0] not in FOLDERS or "://" in token:
            continue
        if not any(c in token for c in "<>{}$~"):
            found.append(token)
    return found


def exists(path: str) -> bool:
    if "*" in path:
        return any(any(base.glob(path)) for base in PACKAGE_ROOTS)
    return any((base / path).exists() for base in PACKAGE_ROOTS)


def missing(text: str) -> list[str]:
    return [p for p in named_paths(text) if p not in EXCEPTIONS and not exists(p)]


def missing_sections(text: str, folder: pathlib.Path = ROOT) -> list[str]:
    """The sections a text names as `DOC, "Title"` that DOC has no heading for (one
    starting with the title); DOC from the repository's root or the text's folder."""
    found = []
    for match in SECTION.finditer(text):
        doc = "README.md" if match["doc"] == "README" else match["doc"]
        file = next((base / doc for base in (ROOT, folder) if (base / doc).is_file()), None)
        headings = (
            [line.lstrip("#").strip().lower() for line in file.read_text().splitlines() if line.startswith("#")]
            if file
            else []
        )
        if not any(h.startswith(match["title"].lower()) for h in headings):
            found.append(match.group(0))
    return found


@pytest.mark.parametrize("source", sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_named_exists(source: pathlib.Path) -> None:
    text = source.read_text(errors="replace")
    assert missing(text) == [], f"{source.relative_to(ROOT)} names paths that do not exist"


@pytest.mark.parametrize("source", sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_section_named_exists(source: pathlib.Path) -> None:
    text = source.read_text(errors="replace")
    assert missing_sections(text, source.parent) == [], f"{source.relative_to(ROOT)} names sections that are not there"


def test_the_check_bites() -> None:
    text = """The probe `tests/spine/scripts/allreduce_probe.py`; built by hack/build-upstream.sh.
    Kept: `tests/local/scripts/allreduce_probe.py`, hack/upstream/*/go.mod, `operator/notices.py`
    (the package's folder), docs/development.md#real-cluster-test, tests/test_doc_paths.py::test_the_check_bites.
    Not paths of ours: hack/upstream/<name>/go.mod, ./.ddpjob/<JOB>, https://example.com/docs/gone.md,
    ${ROOT}/hack/gone.sh, github.com/kubeflow/trainer/docs/gone.md."""
    assert missing(text) == ["tests/spine/scripts/allreduce_probe.py", "hack/build-upstream.sh"]
    assert missing("hack/upstream/*/gone.mod") == ["hack/upstream/*/gone.mod"]
    moved = """see the README's 'Real-cluster test' section; docs/development.md, "Real-cluster test";
    (README, "Real-cluster test"); docs/gone.md, "Anything"."""
    assert missing_sections(moved) == [
        "README's 'Real-cluster test'",
        'README, "Real-cluster test"',
        'docs/gone.md, "Anything"',
    ]


def test_the_folders_are_the_projects() -> None:
    assert all((ROOT / folder).is_dir() for folder in FOLDERS)
    assert {"Makefile", "README.md"} <= {p.name for p in sources()}
