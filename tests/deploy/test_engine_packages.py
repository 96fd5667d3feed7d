"""hack/engine-packages.sh: the project's container engine from Debian's packages, fetched
under an apt configuration of its own and unpacked into the build cache, never installed.
Run with apt-get and dpkg-deb replaced by stubs on PATH (no archive is reached), so what it
asks apt for, how it checks what came, and what it leaves are shown."""

from __future__ import annotations

import os
import pathlib
import subprocess

from tests.deploy.deploy_helpers import ROOT

SCRIPT = ROOT / "hack" / "engine-packages.sh"


def stub(folder: pathlib.Path, name: str, body: str) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(f"#!/usr/bin/env bash\n{body}\n")
    (folder / name).chmod(0o755)


def archive(tmp_path: pathlib.Path, docker_version: str = "26.1.5+dfsg1-9+deb13u1") -> dict[str, str]:
    """apt-get that refuses to run on the system's configuration and 'downloads' one empty
    file per package; dpkg-deb that reads each one's version and 'unpacks' dockerd."""
    bin_dir = tmp_path / "bin"
    stub(
        bin_dir,
        "apt-get",
        f"""
# its own state, never the system's
grep -q "Dir::State::status \\"$(dirname "$APT_CONFIG")/status\\"" "$APT_CONFIG" || exit 9
echo "$*" >>{tmp_path}/apt-calls
if [[ "$2" == download ]]; then shift 2; for p in "$@"; do touch "${{p%%/*}}_x_amd64.deb"; done; fi""",
    )
    versions = {
        "docker.io": docker_version,
        "docker-cli": "26.1.5+dfsg1-9",
        "containerd": "1.7.24~ds1-6",
        "docker-buildx": "0.13.1+ds1-3",
        "tini": "0.19.0-3",
        "runc": "1.1.5+ds1-1+deb12u1",
    }
    cases = "\n".join(f'  *"/{name}_x_amd64.deb") echo {version} ;;' for name, version in versions.items())
    stub(
        bin_dir,
        "dpkg-deb",
        f'''
if [[ "$1" == -f ]]; then case "$2" in
{cases}
esac; exit 0; fi
mkdir -p "$3/usr/sbin" && printf '#!/bin/sh\\n' >"$3/usr/sbin/dockerd" && chmod +x "$3/usr/sbin/dockerd"''',
    )
    return {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "DDPJOB_UPSTREAM_CACHE": str(tmp_path / "cache"),
        "DEBIAN_MIRROR": "http://mirror.invalid/debian",
    }


def test_the_packages_are_fetched_once_with_apts_own_state_and_unpacked_whole(tmp_path: pathlib.Path) -> None:
    env = archive(tmp_path)
    done = subprocess.run([str(SCRIPT)], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    sbin, *_ = done.stdout.strip().split(":")
    assert os.access(pathlib.Path(sbin) / "dockerd", os.X_OK)
    calls = (tmp_path / "apt-calls").read_text().splitlines()
    assert calls[0].endswith("update")
    assert calls[1].endswith(
        "download docker.io/trixie docker-cli/trixie containerd/trixie docker-buildx/trixie tini/trixie runc/bookworm"
    )
    home = pathlib.Path(sbin).parents[2]
    assert (home / "versions").read_text().splitlines()[0] == "docker.io 26.1.5+dfsg1-9+deb13u1"
    assert not (home / "root.partial").exists()
    # Cached: a second call fetches nothing, and the check-only call says it is there.
    again = subprocess.run([str(SCRIPT)], capture_output=True, text=True, timeout=60, env=env)
    check = subprocess.run(
        [str(SCRIPT)], capture_output=True, text=True, timeout=60, env={**env, "BUILD_CHECK_ONLY": "1"}
    )
    assert (
        again.stdout == done.stdout
        and check.returncode == 0
        and len((tmp_path / "apt-calls").read_text().splitlines()) == 2
    )


def test_a_package_of_another_series_is_refused_by_name_and_nothing_is_kept(tmp_path: pathlib.Path) -> None:
    env = archive(tmp_path, docker_version="27.5.1+dfsg1-1")
    done = subprocess.run([str(SCRIPT)], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 1 and done.stdout == ""
    assert "the archive's docker.io is 27.5.1+dfsg1-1; this engine was checked with 26.1.x" in done.stderr
    check = subprocess.run(
        [str(SCRIPT)], capture_output=True, text=True, timeout=60, env={**env, "BUILD_CHECK_ONLY": "1"}
    )
    assert check.returncode == 3 and "not fetched" in check.stderr
    assert not list((tmp_path / "cache").glob("engine-debian-*/root*"))


def test_check_only_and_no_apt_fetch_nothing_and_say_so(tmp_path: pathlib.Path) -> None:
    env = archive(tmp_path)
    check = subprocess.run(
        [str(SCRIPT)], capture_output=True, text=True, timeout=60, env={**env, "BUILD_CHECK_ONLY": "1"}
    )
    assert check.returncode == 3 and check.stdout == "" and "not fetched" in check.stderr
    bin_dir = tmp_path / "bare"
    bin_dir.mkdir()
    for tool in ("bash", "dirname", "sha256sum", "cut"):  # what the script runs, and no apt
        found = next(p for p in ("/usr/bin", "/bin") if (pathlib.Path(p) / tool).exists())
        (bin_dir / tool).symlink_to(pathlib.Path(found) / tool)
    bare = subprocess.run([str(SCRIPT)], capture_output=True, text=True, timeout=60, env={**env, "PATH": str(bin_dir)})
    assert bare.returncode == 3 and "comes from Debian's packages, and apt-get or dpkg-deb is not here" in bare.stderr
    assert not (tmp_path / "apt-calls").exists() and not (tmp_path / "cache").exists()
