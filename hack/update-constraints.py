"""Rewrite constraints.txt: the exact installed version of every package pyproject.toml
asks for (all extras) and of their dependencies, read from this Python's environment.

    .venv/bin/python hack/update-constraints.py     # after `make venv`; review the diff

pyproject.toml holds compatible ranges; constraints.txt, used by the Makefile's venv
install and the Dockerfile, makes the builds reproducible.
"""

from __future__ import annotations

import importlib.metadata as md
import pathlib
import re
import tomllib

from packaging.markers import default_environment
from packaging.requirements import Requirement

ROOT = pathlib.Path(__file__).resolve().parents[1]
HEADER = """\
# Exact versions of every package (and its dependencies) that `make`, CI and the images
# install: pyproject.toml gives compatible ranges, this file makes builds reproducible.
# Written by hack/update-constraints.py from a working .venv; review the diff.
"""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def main() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    todo = [Requirement(r) for r in project["dependencies"]]
    for reqs in project["optional-dependencies"].values():
        todo += [Requirement(r) for r in reqs]
    pins: dict[str, str] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        req = todo.pop()
        name = canonical(req.name)
        if (name, frozenset(req.extras)) in seen or name == "ddpjob":
            continue
        seen.add((name, frozenset(req.extras)))
        env = {key: str(value) for key, value in default_environment().items()} | {"extra": ""}
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        try:
            dist = md.distribution(req.name)
        except md.PackageNotFoundError:
            continue  # an optional dependency for another platform
        pins[name] = dist.version
        for sub in dist.requires or []:
            sub_req = Requirement(sub)
            extras_env = [{**env, "extra": e} for e in req.extras] or [env]
            if sub_req.marker is None or any(sub_req.marker.evaluate(e) for e in extras_env):
                todo.append(sub_req)
    lines = [f"{name}=={version}" for name, version in sorted(pins.items())]
    (ROOT / "constraints.txt").write_text(HEADER + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
