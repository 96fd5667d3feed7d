#!/usr/bin/env python3
"""The Pod template's Kubernetes types, as data: operator/ddpjob/api/template_types.json,
read by operator/ddpjob/api/template_types.py to check a job's `template`.

The types are the official `kubernetes` client's generated models (`openapi_types` and
`attribute_map`, generated from the API's OpenAPI document), from V1PodTemplateSpec down:
written out once here so that neither the operator (whose image ships no official client)
nor the CLI imports a client to check a template, and both check it against the same
release. Run after the pinned client changes (constraints.txt):

    .venv/bin/python hack/template_types.py           # rewrite the file
    .venv/bin/python hack/template_types.py --check   # exit 1 when it differs

tests/api/test_template_types_data.py runs the check.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "operator" / "ddpjob" / "api" / "template_types.json"
ROOT_TYPE = "V1PodTemplateSpec"
SIMPLE = {"str", "int", "bool", "float", "datetime", "object", "date"}


def _inner(type_name: str) -> list[str]:
    """The model names a type string refers to: List[X], Dict[str, X] or X."""
    for prefix in ("List[", "list["):
        if type_name.startswith(prefix):
            return _inner(type_name[len(prefix) : -1])
    for prefix in ("Dict[str, ", "dict[str, ", "dict(str, "):
        if type_name.startswith(prefix):
            return _inner(type_name[len(prefix) : -1])
    return [] if type_name in SIMPLE else [type_name]


def types() -> dict[str, Any]:
    import kubernetes.client as client

    out: dict[str, dict[str, str]] = {}
    todo = [ROOT_TYPE]
    while todo:
        name = todo.pop()
        model = getattr(client, name, None)
        if name in out or model is None:
            continue
        out[name] = {model.attribute_map[attr]: kind for attr, kind in sorted(model.openapi_types.items())}
        todo += [inner for kind in out[name].values() for inner in _inner(kind)]
    version = getattr(__import__("kubernetes"), "__version__", "?")
    return {"client": f"kubernetes {version}", "root": ROOT_TYPE, "types": dict(sorted(out.items()))}


def render() -> str:
    data = types()
    lines = [f'"{k}": {json.dumps(v)}' for k, v in data["types"].items()]
    head = f'{{"client": {json.dumps(data["client"])}, "root": {json.dumps(data["root"])}, "types": {{\n'
    return head + ",\n".join(lines) + "\n}}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the file differs from the installed client")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not OUT.is_file() or OUT.read_text() != text:
            print(f"{OUT.relative_to(ROOT)} differs from the installed client's models: run hack/template_types.py")
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}: {len(json.loads(text)['types'])} types")
    return 0


if __name__ == "__main__":
    sys.exit(main())
