"""The `ddpjob` command as a newcomer meets it: -f like kubectl, -f - for stdin, render
-o yaml|json, --version, help with examples, shell completion, and the warning for a
world that a non-launcher command cannot fill. In-process through `cli.main(argv)`."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from ddpjob import cli, version
from ddpjob.api.launchers import names_a_launcher, world_warning
from ddpjob.api.spec import parse_job
from ddpjob.cli.completion import script
from ddpjob.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "manifests" / "examples" / "mnist-cpu.yaml"


def ddpjob(capsys, *argv: str) -> tuple[int | str | None, str, str]:
    code: int | str | None
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:  # argparse: --help, --version, usage errors
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(
    "argv",
    [["validate", str(EXAMPLE)], ["validate", "-f", str(EXAMPLE)], ["validate", "--filename", str(EXAMPLE)]],
    ids=["positional", "-f", "--filename"],
)
def test_a_file_is_given_positionally_or_with_f(capsys, argv):
    code, out, err = ddpjob(capsys, *argv)
    assert (code, err) == (0, "")
    assert out == f"{EXAMPLE}: DDPJob default/mnist-cpu is valid (2 nodes x 2 processes, gloo)\n"


def stdin(text: str) -> io.TextIOWrapper:
    """Standard input as a process has it: text over bytes (the loader reads the bytes)."""
    return io.TextIOWrapper(io.BytesIO(text.encode()), encoding="utf-8")


def test_f_dash_reads_standard_input(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", stdin(EXAMPLE.read_text()))
    code, out, _ = ddpjob(capsys, "render", "-f", "-")
    assert code == 0
    assert [o["metadata"]["name"] for o in yaml.safe_load_all(out)] == ["mnist-cpu", "mnist-cpu-0", "mnist-cpu-1"]


def test_bad_input_on_stdin_names_the_field(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", stdin("kind: DDPJob\nmetadata: {name: x}\nspec: {nodes: 0, image: i}\n"))
    code, out, err = ddpjob(capsys, "validate", "-f", "-")
    assert code == 1 and out == "" and err == "-: spec.nodes: must be >= 1 (got 0)\n"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["validate"], "a DDPJob file is required (FILE, -f FILE, or -f - for standard input)"),
        (["run", "a.yaml", "-f", "b.yaml"], "two files given (a.yaml and -f b.yaml); give one"),
    ],
)
def test_a_missing_or_doubled_file_is_a_usage_error(capsys, argv, message):
    code, out, err = ddpjob(capsys, *argv)
    assert code == 2 and out == "" and message in err and "Traceback" not in err


def test_render_json_is_one_list_of_the_yaml_objects(capsys):
    _, as_yaml, _ = ddpjob(capsys, "render", "-f", str(EXAMPLE))
    code, as_json, _ = ddpjob(capsys, "render", "-f", str(EXAMPLE), "-o", "json")
    assert code == 0
    listed = json.loads(as_json)
    assert listed["kind"] == "List" and listed["apiVersion"] == "v1"
    assert listed["items"] == list(yaml.safe_load_all(as_yaml))
    code, _, err = ddpjob(capsys, "render", "-f", str(EXAMPLE), "-o", "xml")
    assert code == 2 and "invalid choice: 'xml'" in err


def test_version(capsys):
    code, out, _ = ddpjob(capsys, "--version")
    assert (code, out) == (0, f"ddpjob {version.__version__}\n")
    code, out, _ = ddpjob(capsys, "version", "-o", "json")
    assert code == 0 and json.loads(out) == {"version": version.__version__, "images": version.image_tags()}
    code, out, _ = ddpjob(capsys, "version")
    assert version.trainer_image("cpu") in out and version.operator_image() in out


@pytest.mark.parametrize("argv", [[], ["validate"], ["render"], ["run"], ["completion"]])
def test_help_shows_examples(capsys, argv):
    code, out, _ = ddpjob(capsys, *argv, "--help")
    assert code == 0 and "example" in out
    if argv in (["validate"], ["render"], ["run"]):
        assert "-f FILE, --filename FILE" in out


def test_the_top_level_examples_parse_and_show_the_cluster_commands():
    import re
    import shlex

    from ddpjob.cli.main import EXAMPLES, build_parser

    lines = [re.split(r"\s{2,}", line.strip())[0] for line in EXAMPLES.splitlines() if line.startswith("  ddpjob ")]
    assert {shlex.split(line)[1] for line in lines} >= {
        "validate",
        "render",
        "run",
        "submit",
        "get",
        "describe",
        "wait",
        "logs",
        "delete",
        "operator",
    }
    for line in lines:
        build_parser().parse_args(shlex.split(line)[1:])  # exits 2 on an example that no longer parses


# ---- shell completion --------------------------------------------------------------


def complete(line: str, shell_script: str) -> list[str]:
    """What bash offers for `line` (the cursor at its end) with the generated script."""
    code = (
        'source /dev/stdin <<< "$SCRIPT"; read -ra COMP_WORDS <<< "$LINE"; '
        '[[ "$LINE" == *" " ]] && COMP_WORDS+=(""); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); '
        '_ddpjob; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(
        ["bash", "-c", code],
        env={"SCRIPT": shell_script, "LINE": line, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    return [w for w in done.stdout.splitlines() if w]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@pytest.mark.parametrize(
    "line, offered",
    [
        ("ddpjob re", ["render", "resume"]),
        (
            "ddpjob ",
            [
                "validate",
                "render",
                "run",
                "operator",
                "version",
                "completion",
                "submit",
                "get",
                "describe",
                "wait",
                "logs",
                "delete",
                "suspend",
                "resume",
                "tensorboard",
                "convert",
                "plot",
                "-h",
                "--help",
                "--version",
            ],
        ),
        ("ddpjob render -o ", ["yaml", "json"]),
        ("ddpjob render --out", ["--output"]),
        ("ddpjob run --f", ["--filename", "--fresh"]),
        ("ddpjob completion ", ["bash", "zsh"]),
        ("ddpjob validate -f ", []),  # a file name: bash's own completion (-o default)
    ],
)
def test_bash_completion_offers_subcommands_options_and_choices(capsys, line, offered):
    code, text, _ = ddpjob(capsys, "completion", "bash")
    assert code == 0 and "complete -o default -F _ddpjob ddpjob" in text
    assert complete(line, text) == offered


def test_completion_follows_the_parser(capsys):
    """A subcommand added to the parser completes with no edit to the completion code."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    extra = sub.add_parser("frobnicate")
    extra.add_argument("--level", choices=["low", "high"])
    text = script(parser, "bash")
    assert "frobnicate" in complete("ddpjob frob", text)
    assert complete("ddpjob frobnicate --level ", text) == ["low", "high"]
    assert script(parser, "zsh").startswith("autoload -U +X bashcompinit && bashcompinit\n")


# ---- nprocPerNode > 1 needs a launcher -----------------------------------------------


def job(command, args=(), nproc=2):
    spec = {"nodes": 2, "nprocPerNode": nproc, "image": "x"}
    if command is not None:
        spec["command"] = list(command)
    if args:
        spec["args"] = list(args)
    return parse_job({"metadata": {"name": "j"}, "spec": spec})


@pytest.mark.parametrize(
    "command, args",
    [
        (None, ()),  # the image's entrypoint, ddpjob-launch
        (["ddpjob-launch"], ["ddpjob-train"]),
        (["torchrun", "train.py"], ()),
        (["/opt/venv/bin/torchrun"], ["train.py"]),
        (["python", "-m", "torch.distributed.run", "train.py"], ()),
        (["sh", "-c", "exec torchrun --nproc-per-node 2 train.py"], ()),
    ],
)
def test_launchers_need_no_warning(command, args):
    assert world_warning(job(command, args)) is None


def test_a_plain_script_with_several_processes_per_node_is_warned_about(capsys, tmp_path):
    assert world_warning(job(["python", "train.py"], nproc=1)) is None  # RANK is set: any program works
    message = world_warning(job(["python", "train.py"]))
    assert message.startswith("spec.nprocPerNode: 2 processes per node, but spec.command 'python' is not a launcher")
    assert "WORLD_SIZE=4 and no RANK" in message
    assert not names_a_launcher(["python", "train.py", "--torchrun-ish"])
    path = tmp_path / "job.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "kind": "DDPJob",
                "metadata": {"name": "j"},
                "spec": {"nprocPerNode": 2, "image": "x", "command": ["python", "train.py"]},
            }
        )
    )
    code, out, err = ddpjob(capsys, "validate", "-f", str(path))
    assert code == 0 and "is valid" in out  # a warning, not a refusal: the program may spawn its workers itself
    assert err == f"{path}: warning: {message.replace('WORLD_SIZE=4', 'WORLD_SIZE=2')}\n"


def test_an_elastic_job_without_a_launcher_is_warned_about():
    def elastic(command):
        return parse_job(
            {
                "metadata": {"name": "j"},
                "spec": {
                    "nodes": 2,
                    "nprocPerNode": 1,
                    "image": "x",
                    "command": command,
                    "elastic": {"minNodes": 1, "maxNodes": 2},
                },
            }
        )

    assert world_warning(elastic(["python", "train.py"])).startswith("spec.elastic: spec.command 'python' is not")
    assert world_warning(elastic(["torchrun", "train.py"])) is None


@pytest.mark.parametrize("nproc", [1, 2])
def test_a_misspelt_launcher_is_said_as_a_typo_not_as_a_world_it_cannot_fill(nproc):
    message = world_warning(job(["ddpjob-lanch"], nproc=nproc))
    assert message == (
        "spec.command: 'ddpjob-lanch' is no command ddpjob knows; did you mean 'ddpjob-launch'? "
        "(a command the image does not have cannot start)"
    )
    assert world_warning(job(["/opt/bin/torchrn", "train.py"])).startswith("spec.command: '/opt/bin/torchrn' is no")
    assert "did you mean" not in world_warning(job(["python", "train.py"]))


GLOO_NOTICE = (
    "notice: spec.backend: auto chose gloo: 2 processes per node share 1 GPU(s), and nccl needs one "
    "GPU per process (for nccl, set nprocPerNode to at most 1)"
)


def gpu_job(tmp_path: Path, **spec) -> Path:
    body = yaml.safe_load(EXAMPLE.read_text())
    body["spec"].update({"gpusPerNode": 1, "nprocPerNode": 2, "backend": "auto", **spec})
    path = tmp_path / "gpu.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


@pytest.mark.parametrize("command", ["validate", "render", "run"])
def test_backend_auto_falling_back_to_gloo_is_said_once_by_each_command(command, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("ddpjob.local.gpus.visible_gpus", lambda: [])  # run stops at the GPU check, after the notice
    path = gpu_job(tmp_path)
    code, out, err = ddpjob(capsys, command, str(path))
    assert err.splitlines().count(f"{path}: {GLOO_NOTICE}") == 1, err
    assert GLOO_NOTICE not in out  # stdout stays the result (render's YAML)
    if command == "validate":
        assert code == 0 and out.endswith("(2 nodes x 2 processes, gloo)\n")


@pytest.mark.parametrize("spec", [{}, {"gpusPerNode": 2}, {"backend": "gloo"}], ids=["cpu", "gpu-each", "asked"])
def test_no_notice_when_gloo_is_no_fallback(spec, tmp_path, capsys):
    path = gpu_job(tmp_path, **spec) if spec else EXAMPLE
    code, _, err = ddpjob(capsys, "validate", str(path))
    assert (code, err) == (0, "")


def test_the_readme_says_when_backend_auto_gives_a_notice_and_who_says_it():
    from ddpjob.api import backend

    reference = (ROOT / "docs" / "reference.md").read_text()  # the README's field table, moved there
    row = next(line for line in reference.splitlines() if line.startswith("| `backend` |"))
    for who in ("`ddpjob validate`", "`render`", "`run`", f"`{backend.NOTICE_REASON}`", "trainer"):
        assert who in row, who
    assert "a CPU job" in row  # which jobs get no notice, and why


def test_validate_of_another_kind_says_it_is_not_a_ddpjob_in_one_line(capsys):
    path = ROOT / "manifests" / "examples" / "ckpt-claim.yaml"  # the claim beside the elastic example
    code, out, err = ddpjob(capsys, "validate", "-f", str(path))
    assert (code, out) == (1, "")
    assert err == f"{path}: kind: not a DDPJob: this is a 'PersistentVolumeClaim' (apiVersion 'v1')\n"
