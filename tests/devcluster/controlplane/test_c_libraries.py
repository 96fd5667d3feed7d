"""A cgo component's C libraries (controlplane/c_libraries.py): found with pkg-config, and
where one is missing the build names the Debian package instead of failing deep in cgo."""

import pathlib
import stat

import pytest

from ddpjob_devcluster.controlplane import build, c_libraries
from ddpjob_devcluster.controlplane.go_module import BuildError


def fake_pkg_config(folder: pathlib.Path, present: set[str]) -> None:
    """A pkg-config that knows only `present`."""
    script = folder / "pkg-config"
    names = " ".join(sorted(present))
    script.write_text(f'#!/bin/sh\n[ "$1" = --exists ] || exit 2\nfor n in {names}; do [ "$2" = "$n" ] && exit 0; done\nexit 1\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def runc():
    return build.COMPONENTS["runc"]


def test_runc_links_libseccomp_whose_headers_debian_packages_as_libseccomp_dev(runc):
    assert runc.cgo and "seccomp" in runc.tags and runc.c_libraries == (("libseccomp", "libseccomp-dev"),)
    assert all(not c.c_libraries for c in build.COMPONENTS.values() if c.name != "runc")


def test_a_library_pkg_config_finds_is_not_missing(runc, tmp_path, monkeypatch):
    fake_pkg_config(tmp_path, {"libseccomp"})
    monkeypatch.setenv("PATH", str(tmp_path))
    assert c_libraries.missing(runc) == []
    c_libraries.ensure(runc)  # nothing to install, nothing run


def test_where_nothing_can_install_it_the_error_names_the_package_and_the_command(runc, tmp_path, monkeypatch):
    fake_pkg_config(tmp_path, set())
    monkeypatch.setenv("PATH", str(tmp_path))  # no apt-get here
    assert c_libraries.missing(runc) == [("libseccomp", "libseccomp-dev")]
    with pytest.raises(BuildError) as raised:
        c_libraries.ensure(runc)
    assert str(raised.value) == (
        "building runc needs libseccomp (its headers, for cgo); on Debian, as root: "
        "apt-get install pkg-config libseccomp-dev"
    )


def test_without_root_nothing_is_installed(runc, tmp_path, monkeypatch):
    fake_pkg_config(tmp_path, set())
    apt = tmp_path / "apt-get"
    apt.write_text(f"#!/bin/sh\ntouch {tmp_path}/apt-ran\n")
    apt.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(c_libraries.os, "geteuid", lambda: 1000)
    with pytest.raises(BuildError, match="as root: apt-get install pkg-config libseccomp-dev"):
        c_libraries.ensure(runc)
    assert not (tmp_path / "apt-ran").exists()


def test_an_install_that_leaves_it_missing_is_an_error_not_a_cgo_failure(runc, tmp_path, monkeypatch):
    fake_pkg_config(tmp_path, set())
    apt = tmp_path / "apt-get"
    apt.write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path}/apt-args\n")
    apt.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(c_libraries.os, "geteuid", lambda: 0)
    with pytest.raises(BuildError, match="ran, and pkg-config still finds no libseccomp"):
        c_libraries.ensure(runc, quiet=True)
    calls = (tmp_path / "apt-args").read_text().splitlines()
    assert calls[0].endswith("update -q") and calls[1].endswith("install -y -q --no-install-recommends pkg-config libseccomp-dev")
