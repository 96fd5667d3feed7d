"""hack/kind/images.sh's load_archive, taken from the script and run with `docker` stubbed
(its `exec` runs the node's command here, with `ctr` and `tar` stubbed): the trainer image
is imported into every node given, from the nodes' mounts (an archive, or a layout of links
to the engine's blobs sent in as a tar with the links followed), with the snapshotter the
node's containerd names and the compressed layers discarded once unpacked; a node whose
import fails ends the run, naming it. Then images_in: what it imports, and when."""

from __future__ import annotations

import hashlib
import json
import pathlib
import subprocess
import sys

from tests.deploy.deploy_helpers import ROOT, bash_functions, run_bash

LAYOUT = "/var/ddpjob-shared/.images/trainer.layout"


def load_archive(
    tmp_path: pathlib.Path, source: str, kind: str, *nodes: str, failing: str = ""
) -> subprocess.CompletedProcess[str]:
    function = bash_functions(ROOT / "hack" / "kind" / "images.sh", "load_archive")
    calls, bin_dir = tmp_path / "calls", tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    # In the node: ctr reads what it imports (stdin: the tar), tar says what it sends.
    (bin_dir / "ctr").write_text(
        f'#!/bin/bash\nin=$(cat "${{@: -1}}" 2>/dev/null || cat)\necho "$NODE ctr $* <<$in" >>{calls}\n'
        f'[[ $NODE != "{failing}" ]]\n'
    )
    (bin_dir / "tar").write_text(f'#!/bin/bash\necho "$NODE tar $*" >>{calls}\necho "tar of $2"\n')
    for tool in ("ctr", "tar"):
        (bin_dir / tool).chmod(0o755)
    stubs = f"""
docker() {{
    case "$*" in
        *"containerd config dump") printf "%s\\n" "version = 3" "  [plugins.'io.containerd.cri.v1.images']" \\
                                       "    snapshotter = 'native'" ;;
        "exec "*" bash "*) local node=$2; shift 2; sleep 0.1; NODE=$node PATH={bin_dir}:$PATH "$@" ;;
        *) echo "unexpected: docker $*" >&2; return 2 ;;
    esac
}}
die() {{ echo "FAILED: $*" >&2; exit 1; }}
"""
    call = f"load_archive {source} {kind} {' '.join(nodes)}"
    return run_bash(f"set -euo pipefail\n{stubs}\n{function}\n{call}\necho loaded")


def imports(tmp_path: pathlib.Path) -> list[str]:
    return sorted(line for line in (tmp_path / "calls").read_text().splitlines() if " ctr " in line)


def ctr_import(node: str, source: str) -> str:
    return (
        f"{node} ctr --namespace=k8s.io images import --local --all-platforms --digests --snapshotter=native "
        f"--discard-unpacked-layers {source}"
    )


def test_every_node_imports_the_archive_from_the_shared_mount(tmp_path: pathlib.Path) -> None:
    archive = tmp_path / "trainer.tar"  # ARCHIVE as the nodes see it, here
    archive.write_text("archive")
    done = load_archive(tmp_path, str(archive), "file", "w1", "w2", "w3")
    assert done.returncode == 0 and done.stdout == "loaded\n", done.stderr
    assert imports(tmp_path) == [f"{ctr_import(n, str(archive))} <<archive" for n in ("w1", "w2", "w3")]


def test_a_layout_goes_in_as_a_tar_with_its_links_followed(tmp_path: pathlib.Path) -> None:
    done = load_archive(tmp_path, LAYOUT, "dir", "w1", "w2")
    assert done.returncode == 0 and done.stdout == "loaded\n", done.stderr
    assert imports(tmp_path) == [f"{ctr_import(n, '-')} <<tar of {LAYOUT}" for n in ("w1", "w2")]
    tars = sorted(line for line in (tmp_path / "calls").read_text().splitlines() if " tar " in line)
    assert tars == [f"{n} tar -C {LAYOUT} -chf - ." for n in ("w1", "w2")]


def test_a_node_whose_import_fails_ends_the_run_naming_it(tmp_path: pathlib.Path) -> None:
    done = load_archive(tmp_path, LAYOUT, "dir", "w1", "w2", "w3", failing="w2")
    assert done.returncode == 1 and "loaded" not in done.stdout
    assert done.stderr.strip() == f"FAILED: importing {LAYOUT} on node w2 failed"
    assert len(imports(tmp_path)) == 3


def images_in(
    tmp_path: pathlib.Path,
    pattern: str,
    want: int,
    *images: str,
    save_fails: bool = False,
    archive: pathlib.Path | None = None,
    blobs: pathlib.Path | None = None,
    ids: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """hack/kind/images.sh's images_in with docker and kind stubbed: the workers appear one by
    one as kind makes them (the control plane first), and each node's containerd answers
    only from its second look, as while kind still starts the nodes."""
    functions = bash_functions(ROOT / "hack" / "kind" / "images.sh", "images_in", "containerd_answers")
    assert "packed() {" in functions and "saved() {" in functions
    calls, made = tmp_path / "calls", tmp_path / "made"
    inspect = " ".join(f"{name}) echo {digest} ;;" for name, digest in (ids or {}).items())
    stubs = f"""
CLUSTER=e2e SHARED={tmp_path}/shared ARCHIVES={tmp_path}/archives PY={sys.executable}
ENGINE_BLOBS={blobs or ""} NODE_BLOBS=/var/ddpjob-engine-blobs
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
        "image inspect -f {{{{.Id}}}} "*) case $5 in {inspect} esac ;;
        *" ctr version") [[ -e {tmp_path}/seen-$2 ]] || {{ touch {tmp_path}/seen-$2; return 1; }} ;;
        *) echo "unexpected: docker $*" >&2; return 2 ;;
    esac
}}
load_archive() {{ echo "load_archive $*" >>{calls}; }}
die() {{ echo "FAILED: $*" >&2; exit 1; }}
log() {{ echo "LOG: $*" >&2; }}
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
    assert calls[-1] == "load_archive /var/ddpjob-shared/.images/x.tar file e2e-worker e2e-worker2 e2e-worker3"
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
    assert calls[-1] == f"load_archive /var/ddpjob-shared/.images/x.tar file {nodes}"
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
        "load_archive /var/ddpjob-archives/trainer-0123456789abcdef.tar file e2e-worker e2e-worker2 e2e-worker3"
    )


def content_store(tmp_path: pathlib.Path, layer: bytes = b"layer") -> tuple[pathlib.Path, str, list[str]]:
    """A content store's blobs/sha256 folder holding one image (an index, its manifest, a
    config and a layer), as the engine's containerd keeps them: its index's digest, and
    every blob's."""
    blobs = tmp_path / "content" / "blobs" / "sha256"
    blobs.mkdir(parents=True)

    def put(data: bytes, media: str) -> dict:
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
        return {"mediaType": media, "digest": f"sha256:{digest}", "size": len(data)}

    config = put(b'{"architecture": "amd64", "os": "linux"}', "application/vnd.oci.image.config.v1+json")
    layer_d = put(layer, "application/vnd.oci.image.layer.v1.tar+zstd")
    manifest = put(
        json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": config,
                "layers": [layer_d],
            }
        ).encode(),
        "application/vnd.oci.image.manifest.v1+json",
    )
    index = put(
        json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.index.v1+json",
                "manifests": [{**manifest, "platform": {"architecture": "amd64", "os": "linux"}}],
            }
        ).encode(),
        "application/vnd.oci.image.index.v1+json",
    )
    return blobs, index["digest"], sorted(d["digest"] for d in (config, layer_d, manifest, index))


def test_the_engines_own_blobs_are_linked_into_a_layout_without_a_save(tmp_path: pathlib.Path) -> None:
    """Where the nodes mount the engine's blobs, no `docker save`: a layout in SHARED/.images
    whose blobs are links to where the nodes see them, and index.json naming the image."""
    blobs, index, every = content_store(tmp_path)
    done = images_in(tmp_path, "-worker", 3, "ddpjob/trainer:cpu", blobs=blobs, ids={"ddpjob/trainer:cpu": index})
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert not [c for c in calls if c.startswith("docker save")]
    assert calls[-1] == "load_archive /var/ddpjob-shared/.images/x.layout dir e2e-worker e2e-worker2 e2e-worker3"
    layout = tmp_path / "shared" / ".images" / "x.layout"
    links = {p.name: str(p.readlink()) for p in (layout / "blobs" / "sha256").iterdir()}
    assert links == {d[7:]: f"/var/ddpjob-engine-blobs/{d[7:]}" for d in every}
    entry = json.loads((layout / "index.json").read_text())["manifests"]
    assert [(e["digest"], e["annotations"]["io.containerd.image.name"]) for e in entry] == [
        (index, "docker.io/ddpjob/trainer:cpu")
    ]


def test_a_blob_missing_from_the_engines_store_falls_back_to_a_save(tmp_path: pathlib.Path) -> None:
    blobs, index, every = content_store(tmp_path)
    layer = next(d for d in every if (blobs / d[7:]).read_bytes() == b"layer")
    (blobs / layer[7:]).unlink()
    done = images_in(tmp_path, "-worker", 3, "ddpjob/trainer:cpu", blobs=blobs, ids={"ddpjob/trainer:cpu": index})
    assert done.returncode == 0, done.stderr
    assert f"LOG: no layout of links to the engine's blobs: {layer} is not in {blobs}; docker save of" in done.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[-1] == "load_archive /var/ddpjob-shared/.images/x.tar file e2e-worker e2e-worker2 e2e-worker3"
    assert not (tmp_path / "shared" / ".images" / "x.layout").exists()
