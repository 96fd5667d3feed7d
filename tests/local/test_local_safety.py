"""`ddpjob run` treats the job file and its own directory as input: no link under the job
directory is followed (a planted link cannot make --fresh delete, or the status write
overwrite, a file elsewhere), and job env other than names known to be harmless is
refused without --allow-env (any other name may change what code runs on this machine)."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

from ddpjob.api import spec
from ddpjob.local import safety
from ddpjob.local.container import LocalRunError
from ddpjob.local.runner import run_job


def job(**extra) -> spec.DDPJob:
    return spec.parse_job(
        {
            "apiVersion": "ddpjob.io/v1alpha1",
            "kind": "DDPJob",
            "metadata": {"name": "safe"},
            "spec": {"image": "img", "command": ["true"], **extra},
        }
    )


def test_a_link_in_the_job_directory_is_refused_before_anything_is_touched(tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "data.bin").write_text("keep me")
    workdir = tmp_path / ".ddpjob" / "safe"
    workdir.mkdir(parents=True)
    (workdir / "checkpoints").symlink_to(precious)
    out = io.StringIO()
    assert run_job(job(), workdir, out=out, fresh=True) == 1
    assert f"{workdir / 'checkpoints'} is a symbolic link" in out.getvalue()
    assert (precious / "data.bin").read_text() == "keep me"  # --fresh deleted nothing through it


def test_a_linked_status_file_or_job_directory_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("untouched")
    workdir = tmp_path / ".ddpjob" / "safe"
    workdir.mkdir(parents=True)
    (workdir / "status.yaml").symlink_to(elsewhere)
    with pytest.raises(LocalRunError, match=r"status\.yaml is a symbolic link"):
        safety.refuse_links(workdir)
    with pytest.raises(LocalRunError, match="cannot write"):
        safety.write_no_follow(workdir / "status.yaml", "x")
    assert elsewhere.read_text() == "untouched"
    linked = tmp_path / "linked"
    linked.symlink_to(tmp_path / "target", target_is_directory=True)
    with pytest.raises(LocalRunError, match="linked is a symbolic link"):
        safety.refuse_links(linked)
    os.makedirs(tmp_path / "other" / ".ddpjob-real")
    (tmp_path / "other" / ".ddpjob").symlink_to(tmp_path / "other" / ".ddpjob-real")
    with pytest.raises(LocalRunError, match=r"\.ddpjob is a symbolic link"):
        safety.refuse_links(tmp_path / "other" / ".ddpjob" / "safe")


@pytest.mark.parametrize(
    "name",
    [
        "PYTHONPATH",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "PATH",
        "OPENSSL_CONF",
        "OPENSSL_MODULES",
        "HOME",
        "NCCL_NET_PLUGIN",
        "PYTHONWARNINGS",
        "MY_SETTING",
    ],
)
def test_env_not_known_to_be_harmless_needs_allow_env(tmp_path: Path, name: str) -> None:
    hostile = job(env=[{"name": "OMP_NUM_THREADS", "value": "1"}, {"name": name, "value": "/tmp/evil"}])
    out = io.StringIO()
    assert run_job(hostile, tmp_path / "w", out=out) == 1
    assert (
        f"spec.env[1].name={name}: on this machine a job's env is limited to names known to be harmless"
        in out.getvalue()
    )
    assert "--allow-env" in out.getvalue()
    assert not (tmp_path / "w").exists()  # refused before anything was made
    safety.refuse_unvetted_env(hostile.env, allowed=True)  # --allow-env: no refusal


def test_harmless_names_the_contracts_and_ddpjobs_own_pass() -> None:
    env = [
        {"name": n, "value": "1"}
        for n in (
            "OMP_NUM_THREADS",
            "NCCL_DEBUG",
            "TORCH_NCCL_ASYNC_ERROR_HANDLING",
            "DDPJOB_COLLECTIVE_TIMEOUT_SECONDS",
            "DDPJOB_TEST_HANG_AT_STEP",
            "PYTHONUNBUFFERED",
        )
    ]
    assert safety.unvetted_env(env) == []
    safety.refuse_unvetted_env(env, allowed=False)


def test_a_job_pointing_home_at_a_planted_site_directory_runs_nothing_of_it(tmp_path: Path) -> None:
    """A job that runs only a plain interpreter, with `HOME: <the repository>`: Python's
    user site directory under that HOME runs every `.pth` file in it at start. The
    interpreter is the base one (a virtual environment turns the user site off)."""
    python = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    if not python.exists():
        pytest.skip(f"no base interpreter at {python}")
    site = (
        tmp_path
        / "repo"
        / ".local"
        / "lib"
        / f"python{sys.version_info.major}.{sys.version_info.minor}"
        / "site-packages"
    )
    site.mkdir(parents=True)
    marker = tmp_path / "planted-code-ran"
    (site / "zz.pth").write_text(f"import pathlib; pathlib.Path({str(marker)!r}).touch()\n")
    hostile = spec.parse_job(
        {
            "apiVersion": "ddpjob.io/v1alpha1",
            "kind": "DDPJob",
            "metadata": {"name": "home"},
            "spec": {
                "image": "img",
                "command": [str(python), "-c", "pass"],
                "nprocPerNode": 1,
                "env": [{"name": "HOME", "value": str(tmp_path / "repo")}],
            },
        }
    )
    out = io.StringIO()
    assert run_job(hostile, tmp_path / "w1", out=out) == 1
    assert "spec.env[0].name=HOME" in out.getvalue() and not marker.exists()
    # What the refusal prevents: with --allow-env the planted file runs.
    assert run_job(hostile, tmp_path / "w2", out=io.StringIO(), allow_env=True) == 0
    assert marker.exists()


def test_the_template_trainer_env_and_every_linker_variable_count_too(tmp_path: Path) -> None:
    # The template's trainer env is merged into the same local process: LD_PRELOAD there
    # loads a library into it as surely as in spec.env. A sidecar's env never runs here.
    template = {
        "spec": {
            "containers": [
                {"name": "side", "image": "s", "env": [{"name": "LD_PRELOAD", "value": "x"}]},
                {
                    "name": "trainer",
                    "env": [{"name": "LD_AUDIT", "value": "/tmp/a.so"}, {"name": "BASH_ENV", "value": "/tmp/rc"}],
                },
            ]
        }
    }
    hostile = job(template=template)
    assert safety.unvetted_env(hostile.env, hostile.template) == [
        "spec.template.spec.containers[1].env[0].name=LD_AUDIT",
        "spec.template.spec.containers[1].env[1].name=BASH_ENV",
    ]
    out = io.StringIO()
    assert run_job(hostile, tmp_path / "w", out=out) == 1
    assert "spec.template.spec.containers[1].env[0].name=LD_AUDIT" in out.getvalue()
    assert not (tmp_path / "w").exists()  # refused before anything was made
    assert safety.unvetted_env([{"name": "LD_BIND_NOW", "value": "1"}, {"name": "OMP_NUM_THREADS", "value": "x"}]) == [
        "spec.env[0].name=LD_BIND_NOW"
    ]
