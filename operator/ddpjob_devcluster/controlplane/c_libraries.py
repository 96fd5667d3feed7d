"""The C libraries a cgo component links (runc: libseccomp), found with pkg-config and,
where they are missing, installed from Debian's packages (hack/apt-install.sh) as
upstream's own build image does (runc's Dockerfile installs libseccomp-dev).

A fresh machine has the runtime library (libseccomp2) but not its headers, and `go build`
then fails deep in cgo with "Package 'libseccomp' ... not found". Here the build says
which package it needs, installs it where it can, and otherwise names the command to run.
"""

from __future__ import annotations

import shutil
import subprocess

from ddpjob_devcluster.controlplane.go_module import MODULES, BuildError, Component

APT_INSTALL = MODULES.parent / "apt-install.sh"
# The script bounds each apt-get (15 min) and the lock wait (10 min); this bounds it all.
INSTALL_SECONDS = 2000


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


def ensure(component: Component) -> None:
    """Every C library the component links is there, installed first where possible."""
    lacking = missing(component)
    if not lacking:
        return
    packages = ["pkg-config", *(deb for _, deb in lacking)]
    needs = f"building {component.name} needs {', '.join(n for n, _ in lacking)} (its headers, for cgo)"
    try:
        done = subprocess.run(
            [str(APT_INSTALL), component.name, *packages],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # stdout is the build's answer (engine.sh reads it)
            timeout=INSTALL_SECONDS,
        )
    except subprocess.TimeoutExpired:
        raise BuildError(f"{needs}; installing {' '.join(packages)} took over {INSTALL_SECONDS} s") from None
    if done.returncode != 0:  # the script said why on stderr
        raise BuildError(f"{needs}; on Debian, as root: apt-get install {' '.join(packages)}")
    still = missing(component)
    if still:
        raise BuildError(f"{component.name}: apt-get install ran, and pkg-config still finds no {still[0][0]}")
