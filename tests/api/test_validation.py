"""Malformed DDPJobs: a field-path error from the model and from every `ddpjob` command,
nothing rendered, nothing started. Well-formed ones (YAML metacharacters in values
included) pass.

The CLI runs in-process through `cli.main(argv)`; a few cases also run the installed
console script, so the entry point and the exit status are proven end to end.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ddpjob import cli
from ddpjob.api import spec
from tests.api.bad_jobs import BAD, GOOD, MARKER

BAD_IDS = [c.id for c in BAD]
GOOD_IDS = [c.id for c in GOOD]
DDPJOB = shutil.which("ddpjob", path=str(Path(sys.executable).parent)) or "ddpjob"


def names_path(errors, path: str) -> bool:
    return any(str(e.path) == path or str(e.path).startswith((path + ".", path + "[")) for e in errors)


def write(case, tmp_path: Path) -> tuple[Path, Path]:
    """The case as a file whose command would create tmp_path/MARKER if it ever ran."""
    marker = tmp_path / MARKER
    path = tmp_path / f"{case.id}.yaml"
    path.write_text(case.yaml_text().replace(f"touch {MARKER}", f"touch {marker}"))
    return path, marker


def ddpjob(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_there_are_enough_cases():
    assert len(BAD) >= 24 and len(set(BAD_IDS)) == len(BAD)
    assert len(set(GOOD_IDS)) == len(GOOD)


@pytest.mark.parametrize("case", BAD, ids=BAD_IDS)
def test_the_model_names_the_field(case):
    errors = spec.validate(case.document())
    assert names_path(errors, case.path), [str(e) for e in errors]
    for e in errors:
        assert e.path and e.message and "\n" not in e.message.replace("\\n", "")


@pytest.mark.parametrize("case", BAD, ids=BAD_IDS)
def test_validate_prints_one_line_per_error_and_exits_1(case, tmp_path, capsys):
    path, _ = write(case, tmp_path)
    code, out, err = ddpjob(capsys, "validate", str(path))
    assert code == 1 and out == ""
    expected = [f"{path}: {e}" for e in spec.validate(yaml.safe_load(path.read_text()))]
    assert err.splitlines() == expected
    assert any(line.startswith(f"{path}: {case.path}") for line in err.splitlines()), err


@pytest.mark.parametrize("case", BAD, ids=BAD_IDS)
def test_render_prints_nothing_and_exits_1(case, tmp_path, capsys):
    path, _ = write(case, tmp_path)
    code, out, err = ddpjob(capsys, "render", str(path))
    assert code == 1 and out == ""
    assert f"{path}: {case.path}" in err


@pytest.mark.parametrize("case", BAD, ids=BAD_IDS)
def test_run_starts_nothing_and_exits_1(case, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path, marker = write(case, tmp_path)
    workdir = tmp_path / "work"
    code, out, err = ddpjob(capsys, "run", str(path), "--workdir", str(workdir))
    assert code == 1 and out == ""
    assert f"{path}: {case.path}" in err
    assert not marker.exists() and not workdir.exists() and not (tmp_path / ".ddpjob").exists()


@pytest.mark.parametrize("case", GOOD, ids=GOOD_IDS)
def test_good_jobs_validate_and_render(case, tmp_path, capsys):
    assert spec.validate(case.document()) == []
    path, _ = write(case, tmp_path)
    code, out, err = ddpjob(capsys, "validate", str(path))
    assert code == 0 and out.startswith(f"{path}: DDPJob ") and "is valid" in out
    # A good job may still earn a warning (a non-launcher command with nprocPerNode > 1, or elastic).
    assert all(
        line.startswith((f"{path}: warning: spec.nprocPerNode: ", f"{path}: warning: spec.elastic: "))
        for line in err.splitlines()
    ), err
    warnings = err
    code, out, err = ddpjob(capsys, "render", str(path))
    assert (code, err) == (0, warnings)  # the same warnings, once, on stderr: stdout is the YAML
    kinds = [o["kind"] for o in yaml.safe_load_all(out)]
    groups = kinds.count("PodGroup")  # a gang job's PodGroup comes first (spec.scheduling.gang)
    assert groups <= 1 and kinds[:groups] == ["PodGroup"] * groups
    assert kinds[groups] == "Service" and kinds.count("Pod") == spec.parse_job(case.document()).nodes


def test_metacharacters_in_env_values_survive_unchanged():
    case = next(c for c in GOOD if c.id == "metacharacters-in-env-values-and-args")
    job = spec.parse_job(case.document())
    assert {e["name"]: e["value"] for e in job.env} == {e["name"]: e["value"] for e in case.body["spec"]["env"]}
    assert list(job.args) == case.body["spec"]["args"]


def test_nulls_mean_unset_as_the_api_server_prunes_them():
    case = next(c for c in GOOD if c.id == "nodes-and-nproc-null-take-defaults")
    job = spec.parse_job(case.document())
    assert (job.nodes, job.nproc_per_node, job.suspend) == (1, 1, False)


def test_every_error_of_a_file_is_reported_at_once(tmp_path, capsys):
    body = BAD[0].document()
    body["spec"].update(port=0, backend="mpi", env=[{"name": "RANK", "value": 1}])
    body["metadata"]["name"] = "Bad.Name"
    path = tmp_path / "many.yaml"
    path.write_text(yaml.safe_dump(body))
    code, _, err = ddpjob(capsys, "validate", str(path))
    assert code == 1
    for field in ("spec.nodes", "spec.port", "spec.backend", "spec.env[0].name", "spec.env[0].value", "metadata.name"):
        assert f"{path}: {field}: " in err


def test_each_document_of_a_multi_document_file_is_named(tmp_path, capsys):
    good = next(c for c in GOOD if c.id == "minimal")
    bad = next(c for c in BAD if c.id == "nodes-zero")
    path = tmp_path / "two.yaml"
    path.write_text(good.yaml_text() + "---\n" + bad.yaml_text())
    code, out, err = ddpjob(capsys, "validate", str(path))
    assert code == 1 and out == ""
    assert err.splitlines() == [f"{path}: document 2: spec.nodes: must be >= 1 (got 0)"]


@pytest.mark.parametrize("command", ["validate", "render", "run"])
def test_an_empty_file_is_one_clear_line(command, tmp_path, capsys):
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing here\n")
    code, out, err = ddpjob(capsys, command, str(path))
    assert (code, out) == (1, "")
    assert err.splitlines() == [f"error: {path}: holds no DDPJob"]


YAML_ERRORS = {
    "unquoted-colon-in-name": (
        "apiVersion: ddpjob.io/v1alpha1\nkind: DDPJob\nmetadata:\n  name: a: b\nspec: {image: x}\n"
    ),
    "unclosed-quote": 'apiVersion: ddpjob.io/v1alpha1\nkind: DDPJob\nspec:\n  image: "x\n',
    "tab-indent": "spec:\n\timage: x\n",
    "undefined-alias": "metadata:\n  name: *anchor\nspec: {image: x}\n",
}


@pytest.mark.parametrize("command", ["validate", "render", "run"])
@pytest.mark.parametrize("text", YAML_ERRORS.values(), ids=YAML_ERRORS.keys())
def test_a_yaml_syntax_error_fails_with_exit_1_and_nothing_on_stdout(command, text, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    code, out, err = ddpjob(capsys, command, str(path))
    assert (code, out) == (1, "")
    assert err.startswith(f"error: {path}: not valid YAML") and "line " in err
    assert not (tmp_path / ".ddpjob").exists()


def test_a_yaml_syntax_error_is_one_line(tmp_path, capsys):
    path = tmp_path / "broken.yaml"
    path.write_text(YAML_ERRORS["unquoted-colon-in-name"])
    code, _, err = ddpjob(capsys, "validate", str(path))
    assert code == 1 and len(err.splitlines()) == 1 and "line 4" in err


# --- end to end through the installed console script (a handful: each costs a process) --


def console(*argv, cwd):
    return subprocess.run([DDPJOB, *argv], cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("case_id", ["nodes-string", "env-reserved-master-addr", "name-yaml-mapping"])
def test_console_script_validate(case_id, tmp_path):
    case = next(c for c in BAD if c.id == case_id)
    path, _ = write(case, tmp_path)
    result = console("validate", str(path), cwd=tmp_path)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines()[0].startswith(f"{path}: {case.path}")


def test_console_script_run_starts_nothing(tmp_path):
    case = next(c for c in BAD if c.id == "nccl-without-gpus")
    path, marker = write(case, tmp_path)
    result = console("run", str(path), cwd=tmp_path)
    assert result.returncode == 1 and result.stdout == "" and f"{path}: spec.backend: " in result.stderr
    assert not marker.exists() and not (tmp_path / ".ddpjob").exists()


def test_control_a_good_job_does_touch_the_marker(tmp_path):
    """Proves the marker checks above could fail: the same command runs when the job is valid."""
    case = next(c for c in GOOD if c.id == "minimal")
    path, marker = write(case, tmp_path)
    result = console("run", str(path), "--workdir", str(tmp_path / "work"), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert marker.exists()


def test_a_null_field_takes_its_default_as_an_unset_one() -> None:
    """The API server prunes a null from a non-nullable field; a file read by `ddpjob run`
    gets the same: the default, never a None in the model."""
    fields = {"nodes": None, "port": None, "gpuResource": None, "nprocPerNode": None, "maxRestarts": None}
    body = {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {"name": "nulls"},
        "spec": {"image": "trainer:1", **fields},
    }
    job = spec.parse_job(body)
    unset = spec.parse_job({**body, "spec": {"image": "trainer:1"}})
    assert (job.nodes, job.port, job.gpu_resource, job.nproc_per_node, job.max_restarts) == (
        unset.nodes,
        unset.port,
        unset.gpu_resource,
        unset.nproc_per_node,
        unset.max_restarts,
    )
    assert None not in (job.nodes, job.port, job.gpu_resource, job.nproc_per_node, job.max_restarts)
