#!/usr/bin/env python3
"""The changelog entry of a release, as the release workflow publishes it:

    hack/changelog.py 0.2.0 > notes.md

It is the `## 0.2.0` section of CHANGELOG.md (written by people, for people), followed
by every commit since the previous release tag (`git log vPREV..HEAD`), so nothing that
went in is left unsaid. No section for the version is an error: a release says what it
changes.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def section(changelog: str, version: str) -> str | None:
    """The text under `## <version>` up to the next `## ` heading."""
    m = re.search(rf"(?ms)^## \[?{re.escape(version)}\]?\b[^\n]*\n(.*?)(?=^## |\Z)", changelog)
    return m.group(1).strip() if m else None


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


def previous_tag(root: Path, version: str) -> str | None:
    """The newest `v*` tag that is not this release's own."""
    tags = [t for t in git(root, "tag", "--list", "v*", "--sort=-v:refname").split() if t != f"v{version}"]
    return tags[0] if tags else None


def commits(root: Path, since: str | None) -> list[str]:
    rng = [f"{since}..HEAD"] if since else ["HEAD"]
    out = git(root, "log", "--no-merges", "--format=%h %s", *rng)
    return [line for line in out.splitlines() if line]


def entry(version: str, root: Path = ROOT) -> str:
    text = (root / "CHANGELOG.md").read_text() if (root / "CHANGELOG.md").exists() else ""
    body = section(text, version)
    if body is None:
        raise LookupError(f"CHANGELOG.md has no '## {version}' section: write one before tagging v{version}")
    prev = previous_tag(root, version)
    log = commits(root, prev)
    heading = f"Commits since {prev}" if prev else "Commits"
    lines = [body, "", f"### {heading}", ""] + [f"- {c}" for c in log]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: hack/changelog.py VERSION", file=sys.stderr)
        return 2
    try:
        sys.stdout.write(entry(argv[0].removeprefix("v")))
    except LookupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
