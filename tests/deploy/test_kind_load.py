"""hack/e2e-kind.sh's load_archive, taken from the script and run with `docker` stubbed:
the trainer image's archive is imported into every node given, each from the nodes'
shared mount, with the snapshotter the node's containerd names and the compressed layers
discarded once unpacked; a node whose import fails ends the run, naming it."""

from __future__ import annotations

import pathlib
import subprocess

from tests.deploy.deploy_helpers import ROOT, bash_functions, run_bash

ARCHIVE = "/var/ddpjob-shared/.images/trainer.tar"


def load_archive(tmp_path: pathlib.Path, *nodes: str, failing: str = "") -> subprocess.CompletedProcess[str]:
    function = bash_functions(ROOT / "hack" / "e2e-kind.sh", "load_archive")
    calls = tmp_path / "calls"
    stubs = f"""
docker() {{
    echo "$*" >>{calls}
    case "$*" in
        *"containerd config dump") printf "%s\\n" "version = 3" "  [plugins.'io.containerd.cri.v1.images']" \\
                                       "    snapshotter = 'native'" ;;
        "exec {failing} ctr "*) sleep 0.2; return 1 ;;
        *" ctr "*) sleep 0.1 ;;
        *) echo "unexpected: docker $*" >&2; return 2 ;;
    esac
}}
die() {{ echo "FAILED: $*" >&2; exit 1; }}
"""
    return run_bash(f"set -euo pipefail\n{stubs}\n{function}\nload_archive {ARCHIVE} {' '.join(nodes)}\necho loaded")


def imports(tmp_path: pathlib.Path) -> list[str]:
    return [line for line in (tmp_path / "calls").read_text().splitlines() if " ctr " in line]


def test_every_node_imports_the_archive_from_the_shared_mount(tmp_path: pathlib.Path) -> None:
    done = load_archive(tmp_path, "w1", "w2", "w3")
    assert done.returncode == 0 and done.stdout == "loaded\n", done.stderr
    assert sorted(imports(tmp_path)) == [
        f"exec {node} ctr --namespace=k8s.io images import --local --all-platforms --digests --snapshotter=native "
        f"--discard-unpacked-layers {ARCHIVE}"
        for node in ("w1", "w2", "w3")
    ]


def test_a_node_whose_import_fails_ends_the_run_naming_it(tmp_path: pathlib.Path) -> None:
    done = load_archive(tmp_path, "w1", "w2", "w3", failing="w2")
    assert done.returncode == 1 and "loaded" not in done.stdout
    assert done.stderr.strip() == f"FAILED: importing {ARCHIVE} on node w2 failed"
    assert len(imports(tmp_path)) == 3
