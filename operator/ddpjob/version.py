"""The one ddpjob version, and the image tags derived from it.

Everything else that names the release (pyproject, the chart's version/appVersion and
image values, the examples, the kustomize base, the Dockerfile, the e2e script) is
checked against this file by tests/deploy/test_version.py; `hack/set-version.py NEW`
rewrites all of them. Pure and import-free: the trainer side imports it too.
"""

__version__ = "0.2.0"

# The CUDA trainer image is built on PyTorch's own CUDA image; its tag names both, as
# "<version>-cu<major><minor>-torch<major>.<minor>" (the Dockerfile's CUDA_BASE_IMAGE
# and pyproject's torch pin are checked against these).
TORCH_VERSION = "2.14.1"
CUDA_VERSION = "13.0"

OPERATOR_REPOSITORY = "ddpjob/operator"
TRAINER_REPOSITORY = "ddpjob/trainer"
TRAINER_VARIANTS = ("cpu", "cuda")


def cuda_variant() -> str:
    """'cu130-torch2.14' for CUDA 13.0 and torch 2.14.x."""
    major, minor = CUDA_VERSION.split(".")[:2]
    return f"cu{major}{minor}-torch{'.'.join(TORCH_VERSION.split('.')[:2])}"


def trainer_tag(variant: str, version: str = __version__) -> str:
    if variant == "cpu":
        return f"{version}-cpu"
    if variant == "cuda":
        return f"{version}-{cuda_variant()}"
    raise ValueError(f"trainer variant must be one of {', '.join(TRAINER_VARIANTS)} (got {variant!r})")


def operator_image(version: str = __version__) -> str:
    return f"{OPERATOR_REPOSITORY}:{version}"


def trainer_image(variant: str, version: str = __version__) -> str:
    return f"{TRAINER_REPOSITORY}:{trainer_tag(variant, version)}"


def image_tags(version: str = __version__) -> dict[str, str]:
    """The image each release publishes, by build name (the release workflow's matrix)."""
    return {
        "operator": operator_image(version),
        "trainer-cpu": trainer_image("cpu", version),
        "trainer-cuda": trainer_image("cuda", version),
    }


if __name__ == "__main__":  # `python -m ddpjob.version [BUILD]`: what the release workflow tags
    import sys

    builds = image_tags()
    if len(sys.argv) > 1 and sys.argv[1] not in builds:
        sys.exit(print(f"error: no image build {sys.argv[1]!r}; one of {', '.join(builds)}", file=sys.stderr) or 2)
    print(builds[sys.argv[1]] if len(sys.argv) > 1 else __version__)
