# The Python base image the Dockerfile's PYTHON_IMAGE names where no registry is reached
# (hack/build-images.sh passes it in): Debian's own Python 3 on the Debian base made by
# hack/debian-base.sh, in the role of the official slim Python image. The apt step needs
# the package mirror: built with --network=host.
ARG DEBIAN_BASE
# DL3006: the base is the image hack/debian-base.sh made here, named by its content hash.
# hadolint ignore=DL3006
FROM ${DEBIAN_BASE}
# The interpreter is the image's own, as in the official Python images: pip installs into
# it (Debian marks its system Python as managed by apt, PEP 668, which the marker file
# removed here says). DL3008: the versions are those of the base's Debian suite.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv python3-pip python-is-python3 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && rm -f /usr/lib/python3*/EXTERNALLY-MANAGED
CMD ["python3"]
