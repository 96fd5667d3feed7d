"""The README's first steps and facts stay true where the code can tell."""
from __future__ import annotations

import pathlib
import re

from ddpjob import version
from ddpjob.api.spec import IMMUTABLE_FIELDS

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
DEVELOPMENT = (ROOT / "docs" / "development.md").read_text()  # the developer material, layout included


def test_every_immutable_field_is_called_immutable() -> None:
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(\w+)`[^\n]*$", README, re.M)}
    for field in IMMUTABLE_FIELDS:
        row = rows.get(field) or next(r for k, r in rows.items() if f"`{field}`" in r)
        assert "Immutable" in row, field
    listed = README.split("immutable fields (", 1)[1].split(")", 1)[0]
    assert sorted(re.findall(r"`(\w+)`", listed)) == sorted(IMMUTABLE_FIELDS)


def test_the_releases_section_names_every_published_image() -> None:
    releases = README.split("## Releases", 1)[1]
    tags = version.image_tags("X.Y.Z")
    for image in tags.values():
        assert f"`{image}`" in releases, image
    assert "oci://" in releases and "python -m build" in releases and "LICENSE" in releases


def test_the_first_steps_say_how_to_get_ddpjob_on_path() -> None:
    first = README.split("## A first job", 1)[0]
    assert "make demo" in first and "make test" in first
    assert "source .venv/bin/activate" in first
    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^demo:", make, re.M) and re.search(r"^test:", make, re.M)


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
    first = README.split("## A first job", 1)[0]
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
    missing = [p.name for p in sorted((ROOT / "hack").iterdir())
               if not p.name.startswith(".") and f"`{p.name}`" not in row and f"`{p.name}/`" not in row]
    assert not missing, "hack/ files missing from docs/development.md's Layout map: " + ", ".join(missing)


def test_the_user_path_comes_first_and_the_developer_material_lives_in_docs() -> None:
    """The README is the user's path; what only a contributor needs (the tiers, the layout,
    what the dev cluster is built from) is in docs/development.md, which the README links."""
    for developer_only in ("## Layout: where each concept lives", "`make test-gpu WHEELS=", "| etcd | `go.etcd.io"):
        assert developer_only not in README, developer_only
        assert developer_only in DEVELOPMENT, developer_only
    assert "(docs/development.md)" in README
    sections = [line for line in README.splitlines() if line.startswith("## ")]
    assert sections[0] == "## A first job" and sections[-2:] == ["## Developing ddpjob", "## Releases"], sections
