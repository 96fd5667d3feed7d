"""The chart README is generated from Chart.yaml and values.yaml (hack/chart_readme.py):
it is up to date, lists every value, and the check catches a stale one."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import yaml

from tests.deploy.deploy_helpers import CHART, ROOT

spec = importlib.util.spec_from_file_location("chart_readme", ROOT / "hack" / "chart_readme.py")
assert spec is not None and spec.loader is not None
chart_readme = importlib.util.module_from_spec(spec)
spec.loader.exec_module(chart_readme)


def test_the_chart_readme_is_up_to_date() -> None:
    assert (CHART / "README.md").read_text() == chart_readme.render(CHART), "run hack/chart_readme.py"


def leaves(values: dict, prefix: str = "") -> set[str]:
    out: set[str] = set()
    for key, value in values.items():
        path = prefix + key
        out |= leaves(value, path + ".") if isinstance(value, dict) and value else {path}
    return out


def test_every_value_is_in_the_readme() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    readme = (CHART / "README.md").read_text()
    documented = {path for path, _ in chart_readme.documented_keys((CHART / "values.yaml").read_text())}
    for leaf in leaves(values):
        # A leaf is in the table itself or inside a documented block (resources, probes.liveness).
        owner = next(
            (p for p in sorted(documented, key=len, reverse=True) if leaf == p or leaf.startswith(p + ".")), None
        )
        assert owner is not None, f"{leaf} has no `# --` comment"
        assert f"| `{owner}` |" in readme


def test_a_new_value_without_regenerating_is_caught(tmp_path: Path) -> None:
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    values = chart / "values.yaml"
    values.write_text(values.read_text() + "\n# -- A value added later.\nnewThing: 3\n")
    fresh = chart_readme.render(chart)
    assert fresh != (chart / "README.md").read_text()
    assert "| `newThing` | int | `3` | A value added later. |" in fresh


def test_documented_keys_follow_nesting() -> None:
    text = "# -- top\na:\n  # -- inner\n  b: 1\n  c: 2\n# -- d\nd: x\n"
    assert chart_readme.documented_keys(text) == [("a", "top"), ("a.b", "inner"), ("d", "d")]
    table = chart_readme.values_table(text)
    assert "| `a` | object |  | top |" in table and '| `d` | string | `"x"` | d |' in table
