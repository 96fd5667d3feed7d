"""hack/kind/images.sh's load_archive, taken from the script and run with `docker` stubbed:
the trainer image's archive is imported into every node given, each from the nodes'
shared mount, with the snapshotter the node's containerd names and the compressed layers
discarded once unpacked; a node whose import fails ends the run, naming it."""

from __future__ import annotations

import pathlib
import subprocess

from tests.deploy.deploy_helpers import ROOT, bash_functions, run_bash

ARCHIVE = "/var/ddpjob-shared/.images/trainer.tar"


def load_archive(tmp_path: pathlib.Path, *nodes: str, failing: str = "") -> subprocess.CompletedProcess[str]:
    function = bash_functions(ROOT / "hack" / "kind" / "images.sh", "load_archive")
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


def images_in(
    tmp_path: pathlib.Path,
    pattern: str,
    want: int,
    *images: str,
    save_fails: bool = False,
    archive: pathlib.Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """hack/kind/images.sh's images_in with docker and kind stubbed: the workers appear one by
    one as kind makes them (the control plane first), and each node's containerd answers
    only from its second look, as while kind still starts the nodes."""
    functions = bash_functions(ROOT / "hack" / "kind" / "images.sh", "images_in", "containerd_answers")
    calls, made = tmp_path / "calls", tmp_path / "made"
    stubs = f"""
CLUSTER=e2e SHARED={tmp_path}/shared ARCHIVES={tmp_path}/archives
kind() {{  # `kind get nodes`: one more worker at each call, up to three, and the control plane
    echo "kind $*" >>{calls}
    echo x >>{made}
    local n=$(wc -l <{made}) i
    echo e2e-control-plane
    for ((i = n < 3 ? n : 3; i >= 1; i--)); do echo "e2e-worker$([[ $i == 1 ]] || echo $i)"; done
}}
docker() {{
    echo "docker $*" >>{calls}
    case "$*" in
        "save -o "*) {"return 1" if save_fails else "touch ${3}"} ;;
        *" ctr version") [[ -e {tmp_path}/seen-$2 ]] || {{ touch {tmp_path}/seen-$2; return 1; }} ;;
        *) echo "unexpected: docker $*" >&2; return 2 ;;
    esac
}}
load_archive() {{ echo "load_archive $*" >>{calls}; }}
die() {{ echo "FAILED: $*" >&2; exit 1; }}
sleep() {{ :; }}
"""
    (tmp_path / "shared" / ".images").mkdir(parents=True)
    (tmp_path / "archives").mkdir(exist_ok=True)
    archive = archive or tmp_path / "shared" / ".images" / "x.tar"
    return run_bash(f"set -euo pipefail\n{stubs}\n{functions}\nimages_in {archive} {pattern} {want} {' '.join(images)}")


def test_the_trainer_image_goes_in_once_every_workers_containerd_answers(tmp_path: pathlib.Path) -> None:
    done = images_in(tmp_path, "-worker", 3, "ddpjob/trainer:cpu")
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0] == f"docker save -o {tmp_path}/shared/.images/x.tar.partial ddpjob/trainer:cpu"
    assert (tmp_path / "shared" / ".images" / "x.tar").is_file()  # renamed once whole
    # Imported once, after all three answered, into the workers only, from the nodes' mount.
    assert calls[-1] == "load_archive /var/ddpjob-shared/.images/x.tar e2e-worker e2e-worker2 e2e-worker3"
    answered = [c for c in calls if c.endswith("ctr version")]
    assert {c.split()[2] for c in answered} == {"e2e-worker", "e2e-worker2", "e2e-worker3"}
    assert sum(c.startswith("load_archive") for c in calls) == 1


def test_the_operator_image_goes_into_every_node_with_both_its_tags(tmp_path: pathlib.Path) -> None:
    """The operator's two tags (the upgrade scenario's second one) in one archive, into the
    control plane too, and only once all four nodes are there: not at the first look, when
    the control plane and one worker are."""
    done = images_in(tmp_path, ".", 4, "ddpjob/operator:e2e", "ddpjob/operator:e2e-next")
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    archive = f"{tmp_path}/shared/.images/x.tar"
    assert calls[0] == f"docker save -o {archive}.partial ddpjob/operator:e2e ddpjob/operator:e2e-next"
    nodes = "e2e-control-plane e2e-worker e2e-worker2 e2e-worker3"
    assert calls[-1] == f"load_archive /var/ddpjob-shared/.images/x.tar {nodes}"
    assert sum(c.startswith("load_archive") for c in calls) == 1


def test_a_failed_save_ends_it_before_any_node_is_touched(tmp_path: pathlib.Path) -> None:
    done = images_in(tmp_path, "-worker", 3, "ddpjob/trainer:cpu", save_fails=True)
    assert done.returncode == 1
    archive = f"{tmp_path}/shared/.images/x.tar"
    assert done.stderr.strip() == f"FAILED: docker save -o {archive} ddpjob/trainer:cpu failed"
    assert (tmp_path / "calls").read_text().splitlines() == [f"docker save -o {archive}.partial ddpjob/trainer:cpu"]
    assert list((tmp_path / "shared" / ".images").iterdir()) == []  # nothing half-made is left


def test_an_archive_a_run_before_kept_is_imported_without_a_save(tmp_path: pathlib.Path) -> None:
    """The trainer's archive kept under ARCHIVES (by the image's layers): no `docker save`, and
    the nodes read it from their mount of that folder."""
    kept = tmp_path / "archives" / "trainer-0123456789abcdef.tar"
    kept.parent.mkdir()
    kept.write_bytes(b"archive")
    done = images_in(tmp_path, "-worker", 3, "ddpjob/trainer:cpu", archive=kept)
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert not [c for c in calls if c.startswith("docker save")]
    assert calls[-1] == (
        "load_archive /var/ddpjob-archives/trainer-0123456789abcdef.tar e2e-worker e2e-worker2 e2e-worker3"
    )
