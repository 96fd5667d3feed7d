"""The C libraries a cgo component links (runc: libseccomp), found with pkg-config and,
where they are missing, installed from Debian's packages as upstream's own build image
does (runc's Dockerfile installs libseccomp-dev).

A fresh machine has the runtime library (libseccomp2) but not its headers, and `go build`
then fails deep in cgo with "Package 'libseccomp' ... not found". Here the build says
which package it needs, installs it where it can (Debian's apt-get, as root, as
hack/browser.sh installs Chromium), and otherwise names the command to run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from ddpjob_devcluster.controlplane.go_module import BuildError, Component

# apt waits this long for another apt's lock, and each apt-get this long in all.
APT_LOCK_SECONDS = 600
APT_SECONDS = 900


def missing(component: Component) -> list[tuple[str, str]]:
    """(pkg-config name, Debian package) of each library the component needs and lacks."""
    if not component.c_libraries:
        return []
    if shutil.which("pkg-config") is None:
        return list(component.c_libraries)
    return [
        lib
        for lib in component.c_libraries
        if subprocess.run(["pkg-config", "--exists", lib[0]], stdin=subprocess.DEVNULL, timeout=30).returncode != 0
    ]


def ensure(component: Component, *, quiet: bool = False) -> None:
    """Every C library the component links is there, installed first where possible."""
    lacking = missing(component)
    if not lacking:
        return
    packages = ["pkg-config", *(deb for _, deb in lacking)]
    command = f"apt-get install {' '.join(packages)}"
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        raise BuildError(
            f"building {component.name} needs {', '.join(n for n, _ in lacking)} (its headers, for cgo); "
            f"on Debian, as root: {command}"
        )
    if not quiet:
        print(f"{component.name} needs {', '.join(packages[1:])}: {command}", file=sys.stderr, flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    wait = ["-o", f"DPkg::Lock::Timeout={APT_LOCK_SECONDS}"]
    for args in (["update", "-q"], ["install", "-y", "-q", "--no-install-recommends", *packages]):
        try:
            done = subprocess.run(
                ["apt-get", *wait, *args],
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=APT_SECONDS,
            )
        except subprocess.TimeoutExpired:
            raise BuildError(f"{component.name}: apt-get {args[0]} took over {APT_SECONDS} s") from None
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["(no output)"]
            raise BuildError(f"{component.name}: {command} failed (exit {done.returncode}): {tail[0][:300]}")
    still = missing(component)
    if still:
        raise BuildError(f"{component.name}: {command} ran, and pkg-config still finds no {still[0][0]}")
