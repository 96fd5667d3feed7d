"""A cgo component's C libraries (controlplane/c_libraries.py): found with pkg-config, and
where one is missing the build names the Debian package instead of failing deep in cgo."""

import os
import pathlib
import shutil
import stat
import subprocess
import tempfile

import pytest

from ddpjob_devcluster.controlplane import build, c_libraries
from ddpjob_devcluster.controlplane.go_module import BuildError


def fake_pkg_config(folder: pathlib.Path, present: set[str]) -> None:
    """A pkg-config that knows only `present`."""
    script = folder / "pkg-config"
    names = " ".join(sorted(present))
    script.write_text(
        f'#!/bin/sh\n[ "$1" = --exists ] || exit 2\nfor n in {names}; do [ "$2" = "$n" ] && exit 0; done\nexit 1\n'
    )
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
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.setattr(c_libraries, "APT_INSTALL", tmp_path / "cannot")
    (tmp_path / "cannot").write_text("#!/bin/sh\necho 'runc: cannot install here' >&2\nexit 3\n")
    (tmp_path / "cannot").chmod(0o755)
    assert c_libraries.missing(runc) == [("libseccomp", "libseccomp-dev")]
    with pytest.raises(BuildError) as raised:
        c_libraries.ensure(runc)
    assert str(raised.value) == (
        "building runc needs libseccomp (its headers, for cgo); "
        "on Debian, as root: apt-get install pkg-config libseccomp-dev"
    )


def apt_get(tmp_path: pathlib.Path) -> pathlib.Path:
    """An apt-get that records its arguments and installs nothing."""
    apt = tmp_path / "apt-get"
    apt.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/apt-args\n')
    apt.chmod(0o755)
    return tmp_path / "apt-args"


def test_the_install_goes_through_the_projects_apt_script_with_bounded_waits(runc, tmp_path, monkeypatch):
    """As root with apt-get: hack/apt-install.sh runs `update` then `install`, each with a
    bound on apt's lock; an install that leaves the library missing is said so, not left to
    fail in cgo."""
    fake_pkg_config(tmp_path, set())
    args = apt_get(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    if os.geteuid() != 0:
        pytest.skip("hack/apt-install.sh installs only as root; this test runs as another user")
    with pytest.raises(BuildError, match="apt-get install ran, and pkg-config still finds no libseccomp"):
        c_libraries.ensure(runc)
    calls = args.read_text().splitlines()
    assert calls == [
        "-o DPkg::Lock::Timeout=600 update -q",
        "-o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends pkg-config libseccomp-dev",
    ]


def test_without_root_the_apt_script_installs_nothing():
    """Run as another user (setpriv, where we are root; EUID is bash's own and read-only):
    the script reads from stdin, and its apt-get lives in a folder that user may use,
    since pytest's own temporary folders are root's alone."""
    with tempfile.TemporaryDirectory(prefix="ddpjob-apt-") as folder:
        bin_dir = pathlib.Path(folder)
        bin_dir.chmod(0o777)
        apt = bin_dir / "apt-get"
        apt.write_text(f"#!/bin/sh\ntouch {bin_dir}/apt-ran\n")
        apt.chmod(0o755)
        cmd = ["bash", "-s", "--", "runc", "libseccomp-dev"]
        if os.geteuid() == 0:
            if shutil.which("setpriv") is None:
                pytest.skip("setpriv (util-linux) is not here to run the script as another user")
            cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
        done = subprocess.run(
            cmd,
            input=c_libraries.APT_INSTALL.read_text(),
            env={"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": folder},
            cwd="/",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 3, done
        assert done.stderr.strip() == (
            "runc: needs libseccomp-dev and cannot install it here (needs Debian's apt-get as root): "
            "apt-get install libseccomp-dev"
        )
        assert not (bin_dir / "apt-ran").exists()
