"""An OCI image layout of images the engine holds, its blobs links to the engine's own.

    python hack/kind/oci_layout.py BLOBS LAYOUT_DIR NODE_BLOBS NAME=DIGEST...

hack/kind/images.sh loads the kind nodes from it: each node mounts the engine's blobs
read-only at NODE_BLOBS and the layout's folder, and `tar -h` of the folder (the links
followed) feeds its `ctr images import`, as `docker save`'s archive (the same layout, in a
tar) would. `docker save` copies every blob first: the trainer's 3 GB took 72 s on an idle
2-core machine, on the tier's critical path whenever the image's top layer changed. A blob
in containerd's content store is named by its digest and never written again once
committed, so a link to it is the blob, made in no time and taking no room. (Symbolic
links, resolved in the nodes: a hard link cannot cross the mount that dockerd makes of its
data root onto itself.)

BLOBS is the engine's content store's blobs/sha256 folder; each NAME an image reference,
DIGEST what `docker image inspect -f {{.Id}}` says of it under the containerd image store
(its index or manifest). Every blob the images reference must be there at the size its
descriptor says, and the indexes and manifests hash to their digest (the layers are GBs:
their size is checked); else nothing is left and the exit status is 3, the reason on
stderr: the caller falls back to `docker save`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys

INDEXES = {
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
}
INDEXES_OCI = "application/vnd.oci.image.index.v1+json"
MANIFEST_OCI = "application/vnd.oci.image.manifest.v1+json"
MANIFESTS = {
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
}
# A JSON document bigger than this is not an index, manifest or config of ours.
MAX_DOCUMENT = 4 << 20


class NotLinkable(Exception):
    """Why the layout cannot be made from this content store."""


def reference(name: str) -> str:
    """NAME as containerd names it: docker.io/library/ added where docker would add it."""
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return name
    return f"docker.io/{name}" if rest else f"docker.io/library/{name}"


def document(path: str, digest: str) -> dict:
    with open(path, "rb") as f:
        data = f.read(MAX_DOCUMENT + 1)
    if len(data) > MAX_DOCUMENT:
        raise NotLinkable(f"{digest} is over {MAX_DOCUMENT} bytes: not an index, manifest or config")
    if "sha256:" + hashlib.sha256(data).hexdigest() != digest:
        raise NotLinkable(f"{path} does not hash to {digest}: not this image's content store")
    return json.loads(data)


def blobs_of(store: str, digest: str, size: int | None, media: str | None, found: set[str]) -> tuple[str, int]:
    """Every blob DIGEST references, itself included, into FOUND; its
    media type (an index's or a manifest's, read from it; MEDIA for any other blob) and size."""
    algorithm, _, hexa = digest.partition(":")
    if algorithm != "sha256" or len(hexa) != 64 or not all(c in "0123456789abcdef" for c in hexa):
        raise NotLinkable(f"{digest!r} is not a sha256 digest")
    path = os.path.join(store, hexa)
    try:
        have = os.stat(path).st_size
    except FileNotFoundError:
        raise NotLinkable(f"{digest} is not in {store}") from None
    if size is not None and have != size:
        raise NotLinkable(f"{digest} is {have} bytes in {store}, its descriptor says {size}")
    found.add(digest)
    if media is not None and media not in INDEXES | MANIFESTS:
        return media, have  # a layer or a config: only its size is checked (layers are GBs)
    doc = document(path, digest)
    media = doc.get("mediaType") or (INDEXES_OCI if "manifests" in doc else MANIFEST_OCI)
    if media in INDEXES:
        children = doc.get("manifests", [])
    elif media in MANIFESTS:
        children = [doc.get("config"), *doc.get("layers", [])]
    else:
        raise NotLinkable(f"{digest} is a {media}, neither an image index nor a manifest")
    for child in children:
        if not isinstance(child, dict) or not isinstance(child.get("digest"), str):
            raise NotLinkable(f"{digest} holds a descriptor without a digest")
        blobs_of(store, child["digest"], child.get("size"), str(child.get("mediaType", "")), found)
    return media, have


def make(store: str, layout: str, node_blobs: str, images: list[tuple[str, str]]) -> int:
    found: set[str] = set()
    entries = []
    for name, digest in images:
        media, size = blobs_of(store, digest, None, None, found)
        ref = reference(name)
        tag = ref.rpartition("/")[2].partition(":")[2] or "latest"
        entries.append(
            {
                "mediaType": media,
                "digest": digest,
                "size": size,
                "annotations": {"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": tag},
            }
        )
    os.makedirs(os.path.join(layout, "blobs", "sha256"))
    for digest in sorted(found):
        hexa = digest.partition(":")[2]
        os.symlink(f"{node_blobs}/{hexa}", os.path.join(layout, "blobs", "sha256", hexa))
    with open(os.path.join(layout, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    with open(os.path.join(layout, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": entries}, f)
    return len(found)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or not all("=" in a for a in argv[3:]):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    store, layout, node_blobs = argv[:3]
    images = [tuple(a.rsplit("=", 1)) for a in argv[3:]]
    if os.path.exists(layout):
        print(f"{layout} exists already", file=sys.stderr)
        return 2
    try:
        count = make(store, layout, node_blobs, images)  # type: ignore[arg-type]
    except (NotLinkable, OSError, ValueError) as error:
        shutil.rmtree(layout, ignore_errors=True)
        print(f"no layout of links to the engine's blobs: {error}", file=sys.stderr)
        return 3
    print(f"{layout}: {count} blobs linked", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
