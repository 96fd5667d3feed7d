"""The Pod template's types that ddpjob checks a job's `template` against
(operator/ddpjob/api/template_types.json) are the pinned official client's generated
models: hack/template_types.py writes them, and this keeps them equal."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "operator" / "ddpjob" / "api" / "template_types.json"


def test_the_data_is_the_pinned_clients_models() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "hack" / "template_types.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_data_reaches_every_type_it_names() -> None:
    types = json.loads(DATA.read_text())["types"]
    simple = {"str", "int", "bool", "float", "datetime", "object"}
    for model, fields in types.items():
        for field, kind in fields.items():
            inner = kind
            while inner.startswith(("List[", "Dict[str, ")):
                inner = inner[inner.index("[") + 1 : -1].removeprefix("str, ")
            assert inner in simple or inner in types, f"{model}.{field}: {kind}"
    assert types["V1PodSpec"]["containers"] == "List[V1Container]"
