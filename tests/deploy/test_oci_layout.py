"""hack/kind/oci_layout.py: the layout of links the kind nodes import the images from, and
what makes it refuse (exit 3, nothing left behind) so that the tier falls back to
`docker save`: a blob missing or of another size, an index that is not what its digest says."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from tests.deploy.deploy_helpers import ROOT
from tests.deploy.test_kind_load import content_store

SCRIPT = ROOT / "hack" / "kind" / "oci_layout.py"


def layout(blobs: pathlib.Path, out: pathlib.Path, *images: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(blobs), str(out), "/in/node", *images],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_two_names_of_one_image_are_both_in_the_index(tmp_path: pathlib.Path) -> None:
    """The operator's two tags (the upgrade scenario's), and names as containerd spells them."""
    blobs, index, every = content_store(tmp_path)
    done = layout(
        blobs, tmp_path / "out", f"ddpjob/operator:e2e={index}", f"busybox:1={index}", f"localhost:5000/op:next={index}"
    )
    assert done.returncode == 0, done.stderr
    entries = json.loads((tmp_path / "out" / "index.json").read_text())["manifests"]
    assert [
        (e["annotations"]["io.containerd.image.name"], e["annotations"]["org.opencontainers.image.ref.name"])
        for e in entries
    ] == [
        ("docker.io/ddpjob/operator:e2e", "e2e"),
        ("docker.io/library/busybox:1", "1"),
        ("localhost:5000/op:next", "next"),
    ]
    assert {e["mediaType"] for e in entries} == {"application/vnd.oci.image.index.v1+json"}
    assert sorted(p.name for p in (tmp_path / "out" / "blobs" / "sha256").iterdir()) == [d[7:] for d in every]
    assert json.loads((tmp_path / "out" / "oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}


@pytest.mark.parametrize("fault", ["missing", "size", "hash"])
def test_a_store_that_does_not_hold_the_image_whole_leaves_nothing(tmp_path: pathlib.Path, fault: str) -> None:
    blobs, index, every = content_store(tmp_path)
    layer = next(d for d in every if (blobs / d[7:]).read_bytes() == b"layer")
    if fault == "missing":
        (blobs / layer[7:]).unlink()
        why = f"{layer} is not in {blobs}"
    elif fault == "size":
        (blobs / layer[7:]).write_bytes(b"a longer layer")
        why = f"{layer} is 14 bytes in {blobs}, its descriptor says 5"
    else:
        (blobs / index[7:]).write_bytes((blobs / index[7:]).read_bytes() + b" ")
        why = f"does not hash to {index}: not this image's content store"
    done = layout(blobs, tmp_path / "out", f"ddpjob/trainer:cpu={index}")
    assert done.returncode == 3
    assert why in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_digest_that_is_not_sha256_is_refused_before_any_path_is_made_of_it(tmp_path: pathlib.Path) -> None:
    blobs, _, _ = content_store(tmp_path)
    done = layout(blobs, tmp_path / "out", "x:1=sha256:../../etc/passwd")
    assert done.returncode == 3 and "is not a sha256 digest" in done.stderr
    assert not (tmp_path / "out").exists()
