"""A component of the real dev cluster: a Go module of ours that pins one upstream release.

Each lives under `hack/upstream/<name>/`: its go.mod requires the upstream module at the
pinned version and lists the commands to build as `tool` directives (go.sum makes the
download checksum-verified). What is read here is what the go.mod says: the release, the
commands and their names, how upstream stamps and tags its build, and the cache key of a
build. Building and caching is build.py's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[3]
MODULES = ROOT / "hack" / "upstream"


class BuildError(RuntimeError):
    """One line for the user: what failed (a pin, a build) and, for a build, where its log is."""


@dataclasses.dataclass(frozen=True)
class Component:
    name: str  # the folder under hack/upstream/
    module: str  # the upstream module whose version the go.mod pins
    # Stamped into the binaries as upstream's release build does (hack/lib/version.sh),
    # so `kubectl version` and discovery report the release, not v0.0.0-master.
    version_package: str | None = None
    modules: pathlib.Path = MODULES  # where the component's Go module folder lives
    # Build tags as upstream's own release build passes them, and whether cgo is on: off
    # gives a static binary that runs in any image; runc needs it (libseccomp).
    tags: tuple[str, ...] = ()
    cgo: bool | None = None  # None: the Go default (on where a C compiler is)
    # The C libraries cgo links: (pkg-config name, Debian package of its headers).
    c_libraries: tuple[tuple[str, str], ...] = ()

    @property
    def folder(self) -> pathlib.Path:
        return self.modules / self.name

    def version(self) -> str:
        """The pinned release, read from go.mod's require of `module`."""
        text = (self.folder / "go.mod").read_text()
        found = re.search(rf"^\s*(?:require\s+)?{re.escape(self.module)}\s+(v\S+)", text, re.M)
        if not found:
            raise BuildError(f"{self.folder / 'go.mod'}: no require of {self.module}")
        return found.group(1)

    def tools(self) -> list[str]:
        """The commands to build: go.mod's `tool` directives."""
        text = (self.folder / "go.mod").read_text()
        block = re.search(r"^tool\s*\((.*?)^\)", text, re.M | re.S)
        lines = block.group(1).split() if block else re.findall(r"^tool\s+(\S+)", text, re.M)
        return [line for line in lines if not line.startswith("//")]

    def binary_names(self) -> list[str]:
        return [binary_name(tool) for tool in self.tools()]

    def ldflags(self) -> str:
        flags = ["-s", "-w"]
        if self.version_package:
            version = self.version()
            major, minor = version.lstrip("v").split(".")[:2]
            flags += [
                f"-X {self.version_package}.gitVersion={version}",
                f"-X {self.version_package}.gitMajor={major}",
                f"-X {self.version_package}.gitMinor={minor}",
                f"-X {self.version_package}.gitTreeState=clean",
            ]
        return " ".join(flags)

    def build_flags(self) -> list[str]:
        return ["-tags", ",".join(self.tags)] if self.tags else []

    def key(self) -> str:
        digest = hashlib.sha256()
        for name in ("go.mod", "go.sum"):
            digest.update((self.folder / name).read_bytes())
        digest.update(self.ldflags().encode())
        if self.tags or self.cgo is not None:
            digest.update(f"{self.tags} cgo={self.cgo}".encode())
        return f"{self.name}-{self.version()}-{digest.hexdigest()[:12]}"


def binary_name(tool: str) -> str:
    """`go build` names a command after its package path's last element, skipping a
    major-version suffix (go.etcd.io/etcd/server/v3 builds `server`): ours are named as
    upstream ships them."""
    if tool == "go.etcd.io/etcd/server/v3":
        return "etcd"
    if tool.startswith("sigs.k8s.io/scheduler-plugins/cmd/"):
        # Its images' names (kube-scheduler and controller): `scheduler` alone says little.
        return "scheduler-plugins-" + tool.rsplit("/", 1)[-1]
    if tool.startswith("volcano.sh/volcano/cmd/"):
        return "vc-" + tool.rsplit("/", 1)[-1]  # its images' names: vc-scheduler, vc-controller-manager
    return tool.rstrip("/").rsplit("/", 1)[-1]


def built_name(name: str, tools: list[str]) -> str:
    """The file `go build` writes for the command ours name `name` (its package path's last
    element, or the one before a major-version suffix)."""
    for tool in tools:
        if binary_name(tool) == name:
            base = tool.rstrip("/").rsplit("/", 1)[-1]
            return base if not re.fullmatch(r"v\d+", base) else tool.rstrip("/").rsplit("/", 2)[-2]
    return name
