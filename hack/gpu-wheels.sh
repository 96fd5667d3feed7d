#!/usr/bin/env bash
# Builds the wheel directory that `make test-gpu WHEELS=DIR` installs from on a GPU machine
# with no package index. Such a machine has a CUDA torch (and torchvision) in its
# Python already; everything else the GPU tier needs has to arrive as files, made here,
# where the index is reachable, for the GPU machine's Python and platform (not this one's):
#
#   hack/gpu-wheels.sh DIR [PYTHON_VERSION]       # `make gpu-wheels WHEELS=DIR`; default 3.12
#
# DIR gets ddpjob's own wheel, built from this checkout, and hack/gpu-wheels.txt with its
# dependencies, at constraints.txt's versions: one version of each, replacing any wheel
# already in DIR. torch, torchvision, triton and nvidia-* are refused: the machine's own
# CUDA build is the one under test (see gpu-wheels.txt).
# Env: PY (a Python with pip that runs here; default python3), PLATFORMS (the platform tags
# the GPU machine's pip accepts; default: manylinux x86_64 from glibc 2.17 to 2.28).
set -euo pipefail

dir=${1:?usage: hack/gpu-wheels.sh DIR [PYTHON_VERSION]}
version=${2:-3.12}
PY=${PY:-python3}
PLATFORMS=${PLATFORMS:-manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64}
root=$(cd "$(dirname "$0")/.." && pwd)

if [[ ! $version =~ ^3\.[0-9]+$ ]]; then
    echo "gpu-wheels: PYTHON_VERSION is the GPU machine's Python as X.Y, e.g. 3.12 (got '$version')" >&2
    exit 2
fi
platforms=()
for p in $PLATFORMS; do platforms+=(--platform "$p"); done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ddpjob is pure Python: its wheel serves every Python version and platform. Built from a
# copy of the checkout's files (uncommitted edits included): setuptools packs whatever its
# build/ folder holds, so a stale one could ship a module that is gone; and the checkout
# stays as it was. Not a git checkout: built where it is.
src=$root
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    src=$tmp/src
    "$PY" - "$root" "$src" <<'COPY'
import pathlib, shutil, subprocess, sys
root, dest = map(pathlib.Path, sys.argv[1:])
listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                        check=True, capture_output=True).stdout.decode().split("\0")
for name in filter(None, listed):
    if (root / name).is_file():  # a file deleted but not yet committed is listed too
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, dest / name)
COPY
fi
"$PY" -m pip wheel -q --no-deps --wheel-dir "$tmp" "$src"
# --only-binary: nothing may need building on the GPU machine, and pip can only pick wheels
# for another Python's tags when it never builds.
if ! "$PY" -m pip download -q --dest "$tmp" --only-binary=:all: --implementation cp \
        --python-version "$version" --abi "cp${version/./}" "${platforms[@]}" \
        -c "$root/constraints.txt" -r "$root/hack/gpu-wheels.txt"; then
    echo "gpu-wheels: no wheel above for CPython $version on $PLATFORMS; PLATFORMS='...' adds tags" >&2
    exit 1
fi

# One version of each package, and none of the machine's own (a new dependency that
# pulls torch in would otherwise replace the CUDA build on the GPU machine).
"$PY" - "$tmp" <<'CHECK'
import pathlib, re, sys
seen = {}
for wheel in sorted(pathlib.Path(sys.argv[1]).glob("*.whl")):
    name = re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
    if name in ("torch", "torchvision", "triton") or name.startswith(("nvidia-", "cuda-")):
        sys.exit(f"gpu-wheels: {wheel.name} is the GPU machine's own; which entry of hack/gpu-wheels.txt pulls it in?")
    if name in seen:
        sys.exit(f"gpu-wheels: two versions of {name}: {seen[name]} and {wheel.name}")
    seen[name] = wheel.name
CHECK

mkdir -p "$dir"
rm -f "$dir"/*.whl
mv "$tmp"/*.whl "$dir"/
echo "gpu-wheels: $(ls "$dir"/*.whl | wc -l) wheels for CPython $version in $dir:"
ls "$dir"
