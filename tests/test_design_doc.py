"""docs/design.md stays true to the code where the code can tell."""

from __future__ import annotations

import pathlib
import re

from ddpjob import contract

ROOT = pathlib.Path(__file__).resolve().parents[1]
DESIGN = (ROOT / "docs" / "design.md").read_text()


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", DESIGN, re.S | re.M)
    assert match, f"docs/design.md has no section {title!r}"
    return match.group(1)


def test_the_contract_table_names_every_variable_and_nothing_else() -> None:
    table = section("The environment contract")
    named = set(
        re.findall(r"`([A-Z][A-Z0-9_]+)`", "\n".join(row for row in table.splitlines() if row.startswith("| `")))
    )
    expected = set(contract.MEANING) | {contract.TORCHRUN_PREFIX + n for n in contract.NODE_LEVEL}
    assert named == expected


def test_every_package_with_an_import_rule_is_in_the_package_table() -> None:
    from tests.test_import_boundaries import RULES

    table = section("Packages and what each may import")
    for package in RULES:
        shown = "ddpjob.contract" if package == "ddpjob.<pure>" else package
        assert f"`{shown}`" in table, package


def test_no_file_cites_a_design_document_that_does_not_exist() -> None:
    missing = "DESIGN" + ".md"  # the first brief's file, which is not in the repository
    for path in [*ROOT.glob("operator/**/*.py"), *ROOT.glob("trainer_image/**/*"), *ROOT.glob("tests/**/*.py")]:
        if path.is_file() and path.suffix in (".py", ".md"):
            text = path.read_text(errors="replace")
            assert missing not in text, path
