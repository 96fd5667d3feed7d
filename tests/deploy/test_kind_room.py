"""hack/kind/room.sh's room_for_images, as hack/e2e-kind.sh and hack/kind-ready.sh ask it
before a cluster is made, with `docker` and `df` stubbed: what the images need on the
engine's disk (the trainer's packed and unpacked on each worker, the operator's on every
node, an archive where one is written) against what is free, each figure named."""

from __future__ import annotations

import pathlib
import subprocess
from typing import Any

import pytest

from tests.deploy.deploy_helpers import ROOT, bash_functions, run_bash

ROOM = ROOT / "hack" / "kind" / "room.sh"


def room_for_images(tmp_path: pathlib.Path, free_gb: int, **options: Any) -> subprocess.CompletedProcess[str]:
    """hack/kind/room.sh's room_for_images as hack/e2e-kind.sh calls it, with _stubs(OPTIONS)."""
    function = bash_functions(ROOM, "image_bytes", "room_for_images")
    stubs = _stubs(tmp_path, free_gb, **options)
    return run_bash(f'set -euo pipefail\n{stubs}\n{function}\nroom=$(room_for_images) || die "$room"\necho room')


def _stubs(
    tmp_path: pathlib.Path,
    free_gb: int,
    *,
    listed: tuple[str, str] = ("9GB", "750MB"),
    tmp_free_gb: int | None = None,
    kept: bool = False,
    blobs: bool = False,
) -> str:
    """Stubs: `docker` saying the trainer's archive is 3 GB and the operator's 0.25 GB (`.Size`), and `docker image ls`
    saying `listed`; `df` says `free_gb` GiB are free under the engine's root, and TMPDIR is
    on the same filesystem unless `tmp_free_gb` gives it its own; the trainer's archive is
    kept under ARCHIVES (on the engine root's filesystem) from a run before if `kept`, and
    the nodes read the engine's own blobs instead of any archive if `blobs`."""
    gib = 1024**3
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    archives = tmp_path / "archives"
    archives.mkdir(exist_ok=True)
    trainer_archive = archives / "trainer-0123456789abcdef.tar"
    if kept:
        trainer_archive.write_bytes(b"archive")
    else:
        trainer_archive.unlink(missing_ok=True)
    tmp_avail = free_gb * gib if tmp_free_gb is None else tmp_free_gb * gib
    # The engine's root is its own mount point, as under a running dockerd (it mounts its data
    # root onto itself); TMPDIR is told from it by its device: the real one (the same
    # filesystem as tmp_path), or another where it has a filesystem of its own.
    own_device = (
        "" if tmp_free_gb is None else f'stat() {{ [[ "$*" == "-c %d {tmp}" ]] && echo 4242 || command stat "$@"; }}'
    )
    return f"""
docker() {{
    case "$*" in
        "info -f {{{{.DockerRootDir}}}}") echo "{tmp_path}" ;;
        "image inspect -f {{{{.Size}}}} "*trainer*) echo 3000000000 ;;
        "image inspect -f {{{{.Size}}}} "*operator*) echo 250000000 ;;
        "image ls --format {{{{.Size}}}} "*trainer*) echo {listed[0]} ;;
        "image ls --format {{{{.Size}}}} "*operator*) echo {listed[1]} ;;
        "image inspect -f {{{{range .RootFS.Layers}}}}{{{{.}}}} {{{{end}}}} "*trainer*) echo "sha256:0123 " ;;
        "image inspect ddpjob/trainer:x ddpjob/operator:e2e") [[ -e {tmp_path / "built"} ]] ;;
        *) echo "unexpected: docker $*" >&2; return 2 ;;
    esac
}}
df() {{
    case "$*" in
        "--output=target {tmp}") printf 'Mounted on\\n/\\n' ;;
        "--output=target {tmp_path}") printf 'Mounted on\\n%s\\n' {tmp_path} ;;
        "--output=avail -B1 {tmp}") printf 'Avail\\n%s\\n' {tmp_avail} ;;
        "--output=avail -B1 {tmp_path}") printf 'Avail\\n%s\\n' {free_gb * gib} ;;
        *) echo "unexpected: df $*" >&2; return 2 ;;
    esac
}}
log() {{ :; }}
die() {{ echo "FAILED: $*" >&2; exit 1; }}
{own_device}
TRAINER_IMAGE=ddpjob/trainer:x OPERATOR_IMAGE=ddpjob/operator:e2e TMPDIR={tmp}
ARCHIVES={archives} TRAINER_ARCHIVE={trainer_archive} ENGINE_BLOBS={tmp_path / "blobs" if blobs else ""}
"""


def test_kind_load_is_given_room_before_a_cluster_is_made(tmp_path: pathlib.Path) -> None:
    """Under the containerd image store the trainer is a 3 GB archive that unpacks to 6 GB
    more (`docker image ls` says 9 GB): each of three workers holds both (27 GB), four nodes
    the operator's 0.75 GB each, both archives wait under TMPDIR (3.25 GB), and 3 GiB besides:
    about 36.5 GB (33.9 GiB), so 34 GiB free is enough and 33 is refused, with both figures and why."""
    assert room_for_images(tmp_path, 34).stdout == "room\n"
    short = room_for_images(tmp_path, 33)
    assert short.returncode == 1 and short.stdout == ""
    assert short.stderr.strip() == (
        f"FAILED: loading the images needs about 33 GB free under {tmp_path} (the trainer image packed and "
        "unpacked on each of 3 workers, the operator's on every node, the archives); 33 GB are free"
    )


@pytest.mark.parametrize("why", ["kept", "blobs"])
def test_a_kept_trainer_archive_is_not_asked_for_again(tmp_path: pathlib.Path, why: str) -> None:
    """The trainer's archive a run before kept is on the disk already, and none is written
    where the nodes read the engine's blobs: 3 GB less are asked (about 33.9 GiB less 2.8),
    so 32 GiB free is enough where 33 was refused without it."""
    assert room_for_images(tmp_path, 32, kept=why == "kept", blobs=why == "blobs").stdout == "room\n"
    assert room_for_images(tmp_path, 32).returncode == 1
    short = room_for_images(tmp_path, 30, kept=why == "kept", blobs=why == "blobs")
    assert short.returncode == 1 and "needs about 31 GB free" in short.stderr


def test_kind_load_room_under_the_classic_image_store(tmp_path: pathlib.Path) -> None:
    """Under the classic store `docker image ls` says `.Size` again and `docker save` writes
    the layers uncompressed: each worker holds 3 GB twice, so about 24.4 GiB is needed."""
    assert room_for_images(tmp_path, 25, listed=("3GB", "250MB")).stdout == "room\n"
    short = room_for_images(tmp_path, 24, listed=("3GB", "250MB"))
    assert short.returncode == 1 and "needs about 24 GB free" in short.stderr and "24 GB are free" in short.stderr


def test_kind_loads_archive_is_checked_where_tmpdir_is(tmp_path: pathlib.Path) -> None:
    """TMPDIR on a filesystem of its own: the operator's archive (0.25 GB) is asked of it,
    not of the engine's root (the trainer's is written under ARCHIVES, on the root's)."""
    assert room_for_images(tmp_path, 34, tmp_free_gb=1).stdout == "room\n"
    short = room_for_images(tmp_path, 34, tmp_free_gb=0)
    assert short.returncode == 1
    assert short.stderr.strip() == (
        f"FAILED: the operator image's archive (about 0 GB) is written under {tmp_path / 'tmp'}; 0 GB are free there"
    )


@pytest.mark.parametrize("built", [True, False], ids=["images-built", "no-images-yet"])
def test_the_room_is_asked_before_the_cluster_is_made(tmp_path: pathlib.Path, built: bool) -> None:
    """A kind node, once started, has taken part of what the check counts for it: the room is
    asked before the cluster is made, of the images the engine holds (the cluster then made
    while they are rebuilt), or, where it holds none yet, of the images built first."""
    if built:
        (tmp_path / "built").touch()
    functions = bash_functions(ROOM, "trainer_archive", "room_then")
    callers = (
        f"build() {{ touch {tmp_path / 'built'}; echo build; }}\n"
        'cluster() { echo cluster; }\nlog() { echo "log: $*"; }'
    )
    script = f"set -euo pipefail\n{_stubs(tmp_path, 34)}\n{functions}\n{callers}\nroom_then build cluster\necho done"
    done = run_bash(script)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    room = next((line for line in lines if line.startswith("log: ")), "")
    assert room.startswith("log: the images: about 33 GB needed under "), lines
    assert lines == ([room, "cluster", "build", "done"] if built else ["build", room, "cluster", "done"])


def test_no_room_makes_no_cluster_and_builds_nothing_more(tmp_path: pathlib.Path) -> None:
    (tmp_path / "built").touch()
    functions = bash_functions(ROOM, "trainer_archive", "room_then")
    callers = "build() { echo build; }\ncluster() { echo cluster; }\nlog() { :; }"
    short = run_bash(f"set -euo pipefail\n{_stubs(tmp_path, 20)}\n{functions}\n{callers}\nroom_then build cluster")
    assert short.returncode == 1 and short.stdout == ""
    assert (
        short.stderr.startswith("FAILED: loading the images needs about 33 GB free")
        and "20 GB are free" in short.stderr
    )
