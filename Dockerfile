# Two images from one file (BuildKit builds only the stages a target needs):
#
#   docker build --target operator -t ddpjob/operator:0.2.0 .
#   docker build --target trainer  -t ddpjob/trainer:0.2.0-cu130-torch2.14 .   # CUDA
#   docker build --target trainer  -t ddpjob/trainer:0.2.0-cpu \
#       --build-arg TRAINER_VARIANT=cpu [--build-arg TORCH_INDEX_URL=<PyTorch CPU wheel index>] .
#
# No `# syntax=` line: the Dockerfile frontend built into BuildKit reads this file, so a
# build needs no image pulled before its first step (see `make images`, which builds
# both with no registry at all).
#
# Behind a TLS-intercepting proxy, or where only the host's network reaches the package
# index, pass the CA bundle that pip must trust and the network, as build options; they
# never end up in an image:
#   docker build ... --secret id=ca-bundle,src=/etc/ssl/certs/ca-certificates.crt --network=host .
#
# Tags: `<version>` (operator), `<version>-cpu` and `<version>-cu<CUDA>-torch<torch>`
# (trainer), from operator/ddpjob/version.py; .github/workflows/release.yaml builds and
# pushes them for linux/amd64 and linux/arm64 (the CUDA variant: amd64 only, as its base).
#
# operator: slim Python, `ddpjob[operator]` only (kopf, aiohttp, prometheus-client;
#           no torch), numeric non-root user, nothing written to the root filesystem.
# trainer:  a PyTorch CUDA base image (torch, torchvision, CUDA, cuDNN, NCCL), plus
#           `ddpjob[trainer]`; entrypoint `ddpjob-launch`. TRAINER_VARIANT=cpu swaps the
#           base for slim Python and installs torch from TORCH_INDEX_URL (empty: the
#           default index, whose Linux wheels pull in the CUDA libraries; PyTorch's
#           CPU-only index makes the image several GB smaller, which matters for kind).
#
# Versions here must match constraints.txt (the exact versions within pyproject.toml's
# ranges); tests/deploy/test_dockerfile.py checks it. Both images install with
# `-c constraints.txt`, so a rebuild gets the same packages.

ARG PYTHON_IMAGE=python:3.12-slim-bookworm
ARG CUDA_BASE_IMAGE=pytorch/pytorch:2.14.1-cuda13.0-cudnn9-runtime
ARG TRAINER_VARIANT=cuda
# The OCI labels of both images. DDPJOB_VERSION is the release (hack/set_version.py keeps
# it equal to operator/ddpjob/version.py); the release workflow passes the commit and the
# repository it builds from.
# The requirements of the core and of one extra (argv[1]) as pyproject.toml names them:
# what each image installs before ddpjob's own wheel (its dependencies' layer). An ARG,
# not an ENV: used while building, never kept in an image.
ARG DEPENDENCIES="import sys, tomllib; p = tomllib.load(open('/deps/pyproject.toml', 'rb'))['project']; print(*p['dependencies'], *p['optional-dependencies'][sys.argv[1]], sep='\\n')"
ARG DDPJOB_VERSION=0.2.0
ARG VCS_REF=unknown
ARG SOURCE_URL=https://github.com/ddpjob/ddpjob

# ---------------------------------------------------------------------------- wheel
# Builds the one `ddpjob` wheel both images install, so neither image carries the
# source tree, setuptools' build dependencies or a .git folder.
FROM ${PYTHON_IMAGE} AS wheel
WORKDIR /src
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore
COPY pyproject.toml README.md LICENSE ./
COPY operator/ddpjob/ operator/ddpjob/
COPY trainer_image/ddpjob_trainer/ trainer_image/ddpjob_trainer/
RUN --mount=type=secret,id=ca-bundle \
    if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi \
 && python -m pip wheel --no-deps --wheel-dir /wheels .

# ------------------------------------------------------------------- operator-venv
FROM ${PYTHON_IMAGE} AS operator-venv
ARG DEPENDENCIES
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
# A venv copied whole into the final stage: no pip cache, no build leftovers, and no pip
# or setuptools (installers, which the operator never runs: about 35 MB with byte-code).
# Byte-code is compiled here because the running container's root FS is read-only.
# No generated Kubernetes client (the official one is the CLI's `cli` extra): the
# operator's calls ride on aiohttp and it reads its credentials as plain data
# (tests/operator/test_no_official_client.py keeps it so).
# The dependencies first (the core's and the [operator] extra's, as pyproject.toml names
# them, at constraints.txt's versions), in a layer of their own: a change to ddpjob's code
# rebuilds only the wheel's install below, not a resolve and download of every dependency.
COPY pyproject.toml constraints.txt /deps/
RUN --mount=type=secret,id=ca-bundle \
    if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi \
 && python -m venv /opt/ddpjob \
 && python -c "$DEPENDENCIES" operator >/deps/requirements.txt \
 && /opt/ddpjob/bin/pip install --no-cache-dir -c /deps/constraints.txt -r /deps/requirements.txt
COPY --from=wheel /wheels/ /wheels/
RUN /opt/ddpjob/bin/pip install --no-cache-dir --no-deps /wheels/ddpjob-*.whl \
 && /opt/ddpjob/bin/pip uninstall -q -y pip setuptools \
 && /opt/ddpjob/bin/python -m compileall -q /opt/ddpjob/lib

# ------------------------------------------------------------------------ operator
FROM ${PYTHON_IMAGE} AS operator
ARG DDPJOB_VERSION
ARG VCS_REF
ARG SOURCE_URL
LABEL org.opencontainers.image.title="ddpjob-operator" \
      org.opencontainers.image.description="kopf operator for the DDPJob custom resource" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${DDPJOB_VERSION}" \
      org.opencontainers.image.revision="${VCS_REF}" \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.url="${SOURCE_URL}" \
      org.opencontainers.image.vendor="ddpjob"
COPY --from=operator-venv /opt/ddpjob/ /opt/ddpjob/
# HOME and TMPDIR point at /tmp, which the chart mounts as an emptyDir: the root FS
# stays read-only and Python never tries to write byte-code or caches into it.
ENV PATH=/opt/ddpjob/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    TMPDIR=/tmp
# Numeric, so the kubelet can verify runAsNonRoot without an /etc/passwd lookup.
USER 65532:65532
# liveness (kopf's /healthz) and Prometheus /metrics
EXPOSE 8080 9090
# `ddpjob operator` is `kopf run -m ddpjob.operator.handlers` plus the metrics server.
# The chart replaces CMD with the flags it renders (scope; --standalone only without
# leader election, which its DDPJOB_LEADER_ELECTION_* variables turn on).
ENTRYPOINT ["ddpjob", "operator"]
CMD ["--all-namespaces", "--standalone", "--liveness", "http://0.0.0.0:8080/healthz", "--metrics-port", "9090"]

# --------------------------------------------------------------- trainer bases
# CUDA: torch, torchvision and the CUDA/cuDNN/NCCL runtime come with the base image.
FROM ${CUDA_BASE_IMAGE} AS trainer-base-cuda

# CPU (kind, laptops, CI): slim Python plus torch from TORCH_INDEX_URL.
FROM ${PYTHON_IMAGE} AS trainer-base-cpu
ARG TORCH_VERSION=2.14.1
ARG TORCHVISION_VERSION=0.29.1
ARG TORCH_INDEX_URL=""
RUN --mount=type=secret,id=ca-bundle \
    if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi \
 && if [ -n "$TORCH_INDEX_URL" ]; then export PIP_INDEX_URL="$TORCH_INDEX_URL"; fi \
 && python -m pip install --no-cache-dir --root-user-action=ignore \
        "torch==${TORCH_VERSION}" "torchvision==${TORCHVISION_VERSION}"

# ------------------------------------------------------------------------- trainer
# DL3006: the base is one of the two stages above, chosen by TRAINER_VARIANT, not a registry image.
# hadolint ignore=DL3006
FROM trainer-base-${TRAINER_VARIANT} AS trainer
ARG DEPENDENCIES
ARG DDPJOB_VERSION
ARG VCS_REF
ARG SOURCE_URL
LABEL org.opencontainers.image.title="ddpjob-trainer" \
      org.opencontainers.image.description="PyTorch DDP trainer and launcher run by every DDPJob Pod" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${DDPJOB_VERSION}" \
      org.opencontainers.image.revision="${VCS_REF}" \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.url="${SOURCE_URL}" \
      org.opencontainers.image.vendor="ddpjob"
# The dependencies first (the core's and the [trainer] extra's, at constraints.txt's
# versions), in a layer of their own, as in operator-venv: a change to ddpjob's code then
# rebuilds only the wheel's layer (a pip resolve and download of every dependency took 21
# of the trainer's 32 s rebuild on two cores). torch/torchvision are already there at the
# pinned versions; a version mismatch with the base would show up as a reinstall.
COPY pyproject.toml constraints.txt /deps/
RUN --mount=type=secret,id=ca-bundle \
    if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi \
 && python -c "$DEPENDENCIES" trainer >/deps/requirements.txt \
 && python -m pip install --no-cache-dir --root-user-action=ignore -c /deps/constraints.txt -r /deps/requirements.txt \
 && rm -rf /deps \
 && useradd --uid 1000 --gid 0 --create-home --home-dir /home/ddpjob ddpjob
COPY --from=wheel /wheels/ /wheels/
RUN python -m pip install --no-cache-dir --root-user-action=ignore --no-deps /wheels/ddpjob-*.whl \
 && rm -rf /wheels
ENV PYTHONUNBUFFERED=1 HOME=/home/ddpjob
WORKDIR /home/ddpjob
# Non-root. Group 0 so a volume made group-writable for root's group (or an fsGroup in
# the DDPJob's template) is writable for checkpoints.
USER 1000:0
ENTRYPOINT ["ddpjob-launch"]
CMD ["ddpjob-train", "--model", "mlp", "--data", "synthetic", "--epochs", "1"]
