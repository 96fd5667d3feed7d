"""One heal clock (sample_audit.healed): the disruption to the END of the first optimizer
step of the next group, for the cluster scenario (heal.py) and the `ddpjob run` benchmark
(benchmarks/in_place_resize.py) alike."""

from __future__ import annotations

import ast
import pathlib

from ddpjob_devcluster.scenarios import sample_audit

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_healed_is_the_end_of_the_first_step_of_the_next_group():
    groups = [(3, [1.0, 2.0, 3.0]), (2, [10.0, 10.5, 11.0]), (3, [20.0, 21.0])]
    assert sample_audit.healed(groups, 5.0) == (2, 10.5)  # its first step started at 10, ended at 10.5
    # A group that made one step ended it when the next group started.
    assert sample_audit.healed([(3, [1.0, 2.0]), (2, [10.0]), (3, [12.0, 13.0])], 5.0) == (2, 12.0)
    assert sample_audit.healed([(3, [1.0, 2.0]), (2, [10.0])], 5.0) is None  # not ended yet
    assert sample_audit.healed(groups, 30.0) is None


def test_the_benchmark_and_the_scenario_read_the_one_clock():
    for path in ("benchmarks/in_place_resize.py", "operator/ddpjob_devcluster/scenarios/heal.py"):
        calls = {
            node.func.attr
            for node in ast.walk(ast.parse((ROOT / path).read_text()))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        }
        assert "healed" in calls, path
