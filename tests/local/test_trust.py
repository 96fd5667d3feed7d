"""What `ddpjob run` refuses from a job file and a directory it did not make: symbolic
links under ./.ddpjob/<name> (never followed), and env that changes how local processes
load code (only with --allow-env)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from ddpjob.api.spec import parse_job
from ddpjob.local import pidlock, trust
from tests.local.test_local_edges import run, write


def job(**spec):
    return parse_job({"metadata": {"name": "j"}, "spec": {"image": "x", **spec}})


# ---- links in the job directory ----------------------------------------------------

@pytest.mark.parametrize("plant", ["status.yaml", ".ddpjob-run.lock", "checkpoints", "job-dir", "ddpjob-dir"])
def test_a_planted_link_is_refused_in_one_line_and_nothing_is_touched(tmp_path: Path, plant: str) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious").write_text("keep me")
    (victim / "checkpoints").mkdir()
    (victim / "checkpoints" / "precious").write_text("keep me")
    marker = tmp_path / "started"
    path = write(tmp_path, "linked", ["sh", "-c", f"touch {marker}"], checkpoint={"claimName": "c"})
    jobdir = tmp_path / ".ddpjob" / "linked"
    if plant == "ddpjob-dir":
        (tmp_path / ".ddpjob").symlink_to(victim)
        link = tmp_path / ".ddpjob"
    elif plant == "job-dir":
        jobdir.parent.mkdir()
        jobdir.symlink_to(victim)
        link = jobdir
    else:
        jobdir.mkdir(parents=True)
        link = jobdir / plant
        link.symlink_to(victim / ("checkpoints" if plant == "checkpoints" else "precious"))
    done = run(tmp_path, "run", "--fresh", str(path))
    assert done.returncode == 1, done.stdout + done.stderr
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert len(lines) == 1 and f"{link} is a symbolic link" in lines[0]
    assert (victim / "precious").read_text() == "keep me"
    assert (victim / "checkpoints" / "precious").read_text() == "keep me"
    assert not marker.exists()


def test_links_deeper_down_are_found_and_a_chosen_workdir_may_be_a_link(tmp_path: Path) -> None:
    root = tmp_path
    jobdir = root / ".ddpjob" / "j"
    (jobdir / "pods" / "j-0-a0").mkdir(parents=True)
    assert trust.first_link(jobdir, root) is None
    (jobdir / "pods" / "j-0-a0" / "progress.json").symlink_to("/etc/passwd")
    assert trust.first_link(jobdir, root) == jobdir / "pods" / "j-0-a0" / "progress.json"
    # --workdir: the user's own link to their scratch disk is theirs; what is inside is checked.
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    chosen = tmp_path / "chosen"
    chosen.symlink_to(scratch)
    assert trust.first_link(chosen) is None
    (scratch / "status.yaml").symlink_to(tmp_path / "x")
    assert trust.first_link(chosen) == chosen / "status.yaml"


def test_files_are_written_and_locked_without_following_a_link(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text("keep me")
    (tmp_path / "status.yaml").symlink_to(target)
    with pytest.raises(OSError):
        trust.write_file(tmp_path / "status.yaml", "status: {}\n")
    (tmp_path / "lock").symlink_to(target)
    with pytest.raises(OSError):
        pidlock.acquire(tmp_path / "lock")
    assert target.read_text() == "keep me"
    trust.write_file(tmp_path / "plain.yaml", "a: 1\n")
    assert (tmp_path / "plain.yaml").read_text() == "a: 1\n"


# ---- env that loads code -------------------------------------------------------------

def test_code_loading_env_is_named_with_its_field() -> None:
    j = job(env=[{"name": "FOO", "value": "1"}, {"name": "PYTHONPATH", "value": "/tmp/evil"}],
            template={"spec": {"containers": [{"name": "side", "image": "s", "env": [{"name": "PATH", "value": "/x"}]},
                                              {"name": "trainer", "env": [{"name": "LD_PRELOAD", "value": "/x.so"}]}]}})
    assert trust.code_loading_env(j) == [("spec.env[1].name", "PYTHONPATH"),
                                         ("spec.template.spec.containers[1].env[0].name", "LD_PRELOAD")]
    for name in ("PATH", "LD_LIBRARY_PATH", "LD_AUDIT", "DYLD_INSERT_LIBRARIES", "PYTHONSTARTUP", "BASH_ENV"):
        assert trust.loads_code(name), name
    for name in ("FOO", "OMP_NUM_THREADS", "NCCL_DEBUG", "MY_PATH"):
        assert not trust.loads_code(name), name


def test_run_refuses_code_loading_env_unless_allowed(tmp_path: Path) -> None:
    marker = tmp_path / "seen"
    path = write(tmp_path, "envjob", ["sh", "-c", f'echo "$PYTHONPATH" > {marker}'],
                 env=[{"name": "PYTHONPATH", "value": "/tmp/evil"}])
    done = run(tmp_path, "run", str(path))
    assert done.returncode == 1 and done.stdout == "" and not marker.exists()
    assert done.stderr == (f"error: {path}: spec.env[0].name: PYTHONPATH changes how local processes load code; "
                           "`ddpjob run` passes it only with --allow-env\n")
    done = run(tmp_path, "run", "--allow-env", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{path}: warning: spec.env[0].name: PYTHONPATH changes how local processes load code" in done.stderr
    assert marker.read_text() == "/tmp/evil\n"
    assert os.environ.get("PYTHONPATH") != "/tmp/evil"
