#!/usr/bin/env bash
# The offline half of `make test-gpu WHEELS=DIR`: on a GPU machine with no
# package index, a venv that uses the machine's own CUDA torch and installs the rest from
# DIR (made by `make gpu-wheels`) with --no-index, so pip never reaches for an index and
# never replaces that torch.
#
#   hack/gpu-venv.sh PYTHON DIR VENV
#
# The venv sees exactly the packages PYTHON sees, through a .pth file naming PYTHON's
# site-packages, rather than with --system-site-packages: that option gives a venv its base
# interpreter's packages, which is right for a system Python but misses the torch of a
# PYTHON that is itself a venv (and brings in whatever else the base has). The venv's own
# packages (DIR's) come first. Rebuilt when PYTHON or DIR's wheels change; else left as is.
set -euo pipefail

python=$1 wheels=$2 venv=$3
fail() { echo "make test-gpu WHEELS=$wheels: $*" >&2; exit 1; }

command -v "$python" >/dev/null || fail "PYTHON=$python is not a command: pass PYTHON=the Python that has the CUDA torch"
for module in torch torchvision; do
    "$python" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$module') is None)" ||
        fail "$module is not installed in PYTHON=$python: the offline GPU tier uses the machine's own (CUDA) $module; install it there, or pass PYTHON=the Python that has it"
done
for name in ddpjob pip; do
    compgen -G "$wheels/$name-*.whl" >/dev/null ||
        fail "no $name wheel in $wheels: make it with \`make gpu-wheels WHEELS=DIR\` where the package index is reachable"
done

key="$("$python" -c 'import sys; print(sys.prefix, sys.version)') $(sha256sum -- "$wheels"/*.whl)"
if [[ -f "$venv/.installed-stamp" && "$(cat "$venv/.installed-stamp")" == "$key" ]]; then
    exit 0
fi
rm -rf "$venv"
# --without-pip, and pip run from its wheel: Debian's Python has no ensurepip unless
# python3-venv is installed, which a machine with no package index cannot add.
"$python" -m venv --without-pip "$venv"
"$python" -c 'import sys; print("\n".join(p for p in sys.path if p.endswith(("site-packages", "dist-packages"))))' \
    > "$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/_gpu_machine_site.pth"
pip_wheel=$(compgen -G "$wheels/pip-*.whl" | head -1)
"$venv/bin/python" "$pip_wheel/pip" install -q --disable-pip-version-check --no-index --no-deps "$wheels"/*.whl
echo "$key" > "$venv/.installed-stamp"
echo "$venv: $(ls "$wheels"/*.whl | wc -l) wheels from $wheels, torch $("$venv/bin/python" -c 'import torch; print(torch.__version__, "from", torch.__file__)')"
