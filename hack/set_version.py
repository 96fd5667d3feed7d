#!/usr/bin/env python3
"""One version, one place: operator/ddpjob/version.py. This script knows every other
place that spells the release out and checks or rewrites them.

    hack/set_version.py --check            # exit 1 with one line per place that drifted
    hack/set_version.py 0.3.0              # write 0.3.0 into version.py and every place

tests/deploy/test_version.py runs the check; the release workflow runs it with
--expect <tag> so that a tag and the files it releases cannot disagree.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VERSION_FILE = "operator/ddpjob/version.py"

# Where image references may appear: every one of `ddpjob/operator:<tag>` and
# `ddpjob/trainer:<tag>` (a tag starting with a digit: `:e2e` and `:bench` are local
# builds) must name this release's tag. tests/ other than these hold arbitrary images.
IMAGE_FILES = (
    "README.md",
    "Dockerfile",
    "docs/*.md",
    "charts/ddpjob-operator/*.yaml",
    "charts/ddpjob-operator/README.md",
    "charts/ddpjob-operator/templates/*",
    "manifests/examples/*.yaml",
    "manifests/examples/*/Dockerfile",
    "manifests/base/*.yaml",
    "hack/*.sh",
    "tests/deploy/fixtures/*.yaml",
    "tests/render/golden/*.yaml",
    "trainer_image/README.md",
)
IMAGE_REF = re.compile(r"ddpjob/(operator|trainer):(\d[\w.+-]*)")

# (file, pattern whose group 1 is a version, what it names)
VERSION_FIELDS = (
    ("charts/ddpjob-operator/Chart.yaml", r"(?m)^version: (\S+)$", "the chart's version"),
    ("charts/ddpjob-operator/Chart.yaml", r'(?m)^appVersion: "([^"]+)"$', "the chart's appVersion"),
    ("manifests/base/kustomization.yaml", r'(?m)^    newTag: "([^"]+)"$', "the operator image tag"),
    ("Dockerfile", r"(?m)^ARG DDPJOB_VERSION=(\S+)$", "the images' version label"),
    ("README.md", r"helm install ddpjob oci://\S+ --version (\S+)", "the chart version to install"),
    ("README.md", r"releases/download/v([^/]+)/", "the release the wheel is downloaded from"),
    ("README.md", r"/ddpjob-([^/]+?)-py3-none-any\.whl", "the wheel's file name"),
)


def load_version_module(root: Path = ROOT) -> dict:
    """version.py's names, executed on their own (the file imports nothing)."""
    names: dict = {}
    exec(compile((root / VERSION_FILE).read_text(), VERSION_FILE, "exec"), names)
    return names


def expected_image_tags(v: dict) -> dict[str, set[str]]:
    return {"operator": {v["__version__"]}, "trainer": {v["trainer_tag"](variant) for variant in v["TRAINER_VARIANTS"]}}


def files(root: Path) -> list[Path]:
    found = {p for pattern in IMAGE_FILES for p in root.glob(pattern) if p.is_file()}
    return sorted(found)


def check(root: Path = ROOT, expect: str | None = None) -> list[str]:
    """One line per place that does not name the version in version.py."""
    v = load_version_module(root)
    version = v["__version__"]
    problems = []
    if expect is not None and expect != version:
        problems.append(f"{VERSION_FILE}: __version__ is {version}, expected {expect}")
    for rel, pattern, what in VERSION_FIELDS:
        found = list(re.finditer(pattern, (root / rel).read_text()))
        if not found:
            problems.append(f"{rel}: {what} not found")
        problems += [f"{rel}: {what} is {m.group(1)}, not {version}" for m in found if m.group(1) != version]
    tags = expected_image_tags(v)
    for path in files(root):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for m in IMAGE_REF.finditer(line):
                if m.group(2) not in tags[m.group(1)]:
                    problems.append(
                        f"{path.relative_to(root)}:{n}: {m.group(0)} is not one of this release's "
                        f"tags ({', '.join(sorted(tags[m.group(1)]))})"
                    )
    return problems


def set_version(new: str, root: Path = ROOT) -> list[Path]:
    """Write `new` into version.py and every place check() reads; the changed files."""
    if not re.fullmatch(r"\d+\.\d+\.\d+([-.+]\w[\w.]*)?", new):
        raise ValueError(f"{new!r} is not a version such as 1.2.3 or 1.2.3-rc.1")
    old_v = load_version_module(root)
    old_tags = {repo: sorted(t, key=len, reverse=True) for repo, t in expected_image_tags(old_v).items()}
    vfile = root / VERSION_FILE
    vfile.write_text(re.sub(r'(?m)^__version__ = "[^"]*"$', f'__version__ = "{new}"', vfile.read_text()))
    new_v = load_version_module(root)
    changed = {vfile}

    def retag(m: re.Match) -> str:
        repo, tag = m.group(1), m.group(2)
        for old in old_tags[repo]:
            if tag == old:
                variant = next((var for var in new_v["TRAINER_VARIANTS"] if old_v["trainer_tag"](var) == old), None)
                return f"ddpjob/{repo}:{new if repo == 'operator' else new_v['trainer_tag'](variant)}"
        return m.group(0)  # a tag of another release: check() reports it, a person decides

    for path in files(root):
        text = path.read_text()
        out = IMAGE_REF.sub(retag, text)
        if out != text:
            path.write_text(out)
            changed.add(path)
    for rel, pattern, _ in VERSION_FIELDS:
        path = root / rel
        text = path.read_text()
        out = re.sub(
            pattern, lambda m: m.group(0)[: m.start(1) - m.start(0)] + new + m.group(0)[m.end(1) - m.start(0) :], text
        )
        if out != text:
            path.write_text(out)
            changed.add(path)
    return sorted(changed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version", nargs="?", help="the new version to write everywhere")
    parser.add_argument("--check", action="store_true", help="only report places that drifted")
    parser.add_argument("--expect", help="with --check: the version a release tag names (v prefix allowed)")
    args = parser.parse_args(argv)
    if args.check or not args.version:
        problems = check(expect=args.expect.removeprefix("v") if args.expect else None)
        for line in problems:
            print(line, file=sys.stderr)
        if not problems:
            print(f"version {load_version_module()['__version__']}: every place agrees")
        return 1 if problems else 0
    try:
        for path in set_version(args.version):
            print(f"updated {path.relative_to(ROOT)}")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
