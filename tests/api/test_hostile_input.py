"""Hostile input to `ddpjob validate`: every case exits 1 with exactly one line on stderr
naming the field (or, for what is wrong with the file itself, the file), nothing on
stdout, and never a traceback, a hang or unbounded memory."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
import yaml

from ddpjob.api.job_file import MAX_BYTES, MAX_DEPTH
from ddpjob.cli.main import main

pytestmark = pytest.mark.timeout(60)

HEAD = "apiVersion: ddpjob.io/v1alpha1\nkind: DDPJob\nmetadata:\n  name: h\n"


def job(spec: dict | None = None, metadata: dict | None = None, **root: Any) -> dict:
    body: dict[str, Any] = {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {"name": "h"},
        "spec": {"image": "img"},
    }
    body["metadata"].update(metadata or {})
    body["spec"].update(spec or {})
    body.update(root)
    return body


def tmpl(spec: dict) -> dict:
    return job({"template": {"spec": spec}})


def trainer(**fields: Any) -> dict:
    return tmpl({"containers": [{"name": "trainer", **fields}]})


BILLION_LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
)


def nested(levels: int) -> dict:
    value: dict = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


# Earlier documents leave freed nodes whose addresses the last one's nodes take.
LAUGHS_AFTER_DOCUMENTS = "---\nx: [[1]]\n" * 50 + "---\n" + BILLION_LAUGHS.split("g: &g")[0]

# (id, document: a dict to dump, or raw text / bytes, the substring the one line must hold)
CASES: list[tuple[str, Any, str]] = [
    # wrong types at every level
    ("root-a-list", "- a\n- b\n", "(root)"),
    ("root-a-string", "just text\n", "(root)"),
    ("root-a-number", "42\n", "(root)"),
    ("api-version-a-number", job(apiVersion=1), "apiVersion"),
    ("kind-a-list", job(kind=["DDPJob"]), "kind"),
    ("metadata-a-list", job(metadata=None) | {"metadata": ["h"]}, "metadata"),
    ("name-a-number", job(metadata={"name": 7}), "metadata.name"),
    ("name-a-map", job(metadata={"name": {"x": 1}}), "metadata.name"),
    ("namespace-a-number", job(metadata={"namespace": 3}), "metadata.namespace"),
    ("spec-a-string", job() | {"spec": "nodes: 2"}, "spec"),
    ("spec-a-number", job() | {"spec": 2}, "spec"),
    ("nodes-a-map", job({"nodes": {"n": 2}}), "spec.nodes"),
    ("nodes-a-list", job({"nodes": [2]}), "spec.nodes"),
    ("nodes-huge", job({"nodes": 10**100}), "spec.nodes"),
    ("nodes-nan", HEAD + "spec:\n  image: img\n  nodes: .nan\n", "spec.nodes"),
    ("nodes-infinity", HEAD + "spec:\n  image: img\n  nodes: .inf\n", "spec.nodes"),
    ("nproc-a-map", job({"nprocPerNode": {"a": 1}}), "spec.nprocPerNode"),
    ("gpus-a-string", job({"gpusPerNode": "two"}), "spec.gpusPerNode"),
    ("image-a-list", job({"image": ["img"]}), "spec.image"),
    ("image-a-map", job({"image": {"repo": "img"}}), "spec.image"),
    ("command-a-map", job({"command": {"sh": "-c"}}), "spec.command"),
    ("args-a-map", job({"args": {"a": 1}}), "spec.args"),
    ("args-item-a-map", job({"args": [{"a": 1}]}), "spec.args[0]"),
    ("env-a-string", job({"env": "FOO=1"}), "spec.env"),
    ("env-a-map", job({"env": {"FOO": "1"}}), "spec.env"),
    ("env-value-a-map", job({"env": [{"name": "A", "value": {"x": 1}}]}), "spec.env[0].value"),
    ("env-name-a-list", job({"env": [{"name": ["A"], "value": "1"}]}), "spec.env[0].name"),
    ("env-name-shell-injection", job({"env": [{"name": "FOO; rm -rf /", "value": "1"}]}), "spec.env[0].name"),
    ("env-name-command-substitution", job({"env": [{"name": "$(whoami)", "value": "1"}]}), "spec.env[0].name"),
    ("env-name-unicode", job({"env": [{"name": "ÄNDERUNG", "value": "1"}]}), "spec.env[0].name"),
    ("env-value-from-a-list", job({"env": [{"name": "A", "valueFrom": ["secret"]}]}), "spec.env[0].valueFrom"),
    ("limits-cpu-a-map", job({"resources": {"limits": {"cpu": {"n": 1}}}}), "spec.resources.limits"),
    ("requests-a-string", job({"resources": {"requests": "cpu=1"}}), "spec.resources.requests"),
    ("port-huge", job({"port": 10**12}), "spec.port"),
    ("port-negative", job({"port": -1}), "spec.port"),
    ("port-a-string", job({"port": "http"}), "spec.port"),
    ("deadline-huge", job({"activeDeadlineSeconds": 100000000000000}), "spec.activeDeadlineSeconds"),
    ("ttl-huge", job({"ttlSecondsAfterFinished": 10**20}), "spec.ttlSecondsAfterFinished"),
    ("backoff-huge", job({"restartBackoffSeconds": 10**20}), "spec.restartBackoffSeconds"),
    ("max-restarts-huge", job({"maxRestarts": 10**9}), "spec.maxRestarts"),
    ("suspend-a-string", job({"suspend": "no"}), "spec.suspend"),
    ("checkpoint-a-string", job({"checkpoint": "pvc"}), "spec.checkpoint"),
    ("checkpoint-volume-a-list", job({"checkpoint": {"volume": ["nfs"]}}), "spec.checkpoint.volume"),
    (
        "checkpoint-relative-path",
        job({"checkpoint": {"claimName": "c", "mountPath": "ckpt"}}),
        "spec.checkpoint.mountPath",
    ),
    # inside the template: the Kubernetes API's own types
    ("template-a-string", job({"template": "spec: {}"}), "spec.template"),
    ("template-spec-a-list", job({"template": {"spec": ["containers"]}}), "spec.template.spec"),
    ("template-containers-a-map", tmpl({"containers": {"trainer": {"image": "x"}}}), "spec.template.spec.containers"),
    ("template-env-a-string", trainer(env="FOO=1"), "spec.template.spec.containers[0].env"),
    (
        "template-port-a-string",
        trainer(ports=[{"containerPort": "http"}]),
        "spec.template.spec.containers[0].ports[0].containerPort",
    ),
    ("template-node-selector-a-bool", tmpl({"nodeSelector": {"gpu": True}}), "spec.template.spec.nodeSelector.gpu"),
    ("template-tolerations-a-map", tmpl({"tolerations": {"key": "x"}}), "spec.template.spec.tolerations"),
    ("template-volume-a-string", tmpl({"volumes": ["data"]}), "spec.template.spec.volumes[0]"),
    ("template-unknown-field", tmpl({"hostNetwrok": True}), "spec.template.spec.hostNetwrok"),
    ("template-labels-a-list", job({"template": {"metadata": {"labels": ["a"]}}}), "spec.template.metadata.labels"),
    (
        "template-run-as-user-a-string",
        tmpl({"securityContext": {"runAsUser": "root"}}),
        "spec.template.spec.securityContext.runAsUser",
    ),
    (
        "template-limits-a-list",
        trainer(resources={"limits": {"memory": [1]}}),
        "spec.template.spec.containers[0].resources.limits.memory",
    ),
    (
        "template-privileged",
        trainer(securityContext={"privileged": True}),
        "spec.template.spec.containers[0].securityContext.privileged",
    ),
    (
        "template-host-path",
        tmpl({"volumes": [{"name": "h", "hostPath": {"path": "/"}}]}),
        "spec.template.spec.volumes[0].hostPath",
    ),
    ("template-host-pid", tmpl({"hostPID": True}), "spec.template.spec.hostPID"),
    # names
    ("name-unicode", job(metadata={"name": "jöb"}), "metadata.name"),
    ("name-injection", job(metadata={"name": "a;rm -rf /"}), "metadata.name"),
    ("name-path-traversal", job(metadata={"name": "../../etc"}), "metadata.name"),
    ("name-too-long", job(metadata={"name": "a" * 300}), "metadata.name"),
    ("name-with-newline", job(metadata={"name": "a\nb"}), "metadata.name"),
    ("name-empty", job(metadata={"name": ""}), "metadata.name"),
    # the file itself: named by its path
    ("alias-bomb", BILLION_LAUGHS, "aliases expand"),
    ("deep-nesting", "a: " + "[" * 10_000 + "]" * 10_000 + "\n", f"nested deeper than {MAX_DEPTH}"),
    ("deep-mappings", "".join("  " * i + f"k{i}:\n" for i in range(200)) + "  " * 200 + "v\n", "nested deeper"),
    ("latin-1", (HEAD + "spec:\n  image: caf\xe9\n").encode("latin-1"), "not UTF-8"),
    ("utf-16", (HEAD + "spec:\n  image: img\n").encode("utf-16"), "not UTF-8"),
    ("duplicate-key", HEAD + "spec:\n  image: img\n  nodes: 1\n  nodes: 64\n", "duplicate key 'nodes'"),
    ("duplicate-metadata", HEAD + "metadata:\n  name: other\nspec:\n  image: img\n", "duplicate key 'metadata'"),
    ("too-large", HEAD + "spec:\n  image: img\n  args: [" + "x, " * (MAX_BYTES // 3) + "]\n", "bytes"),
    ("too-many-nodes", "[" + "1," * 150_000 + "]\n", "YAML nodes"),
    ("python-object-tag", HEAD + "spec: !!python/object/apply:os.system [echo hi]\n", "not valid YAML"),
    ("nul-bytes", b"\x00\x01\x02binary\xff", "not UTF-8"),
    ("only-a-comment", "# nothing here\n", "holds no DDPJob"),
    ("alias-bomb-after-documents", LAUGHS_AFTER_DOCUMENTS, "aliases expand"),
    ("integer-of-5000-digits", HEAD + "spec:\n  image: img\n  nodes: " + "9" * 5000 + "\n", "an integer of 5000"),
    ("a-100-kb-bad-value", job({"workingDir": ["x" * 100_000]}), "spec.workingDir"),
    ("a-megabyte-name", job(metadata={"name": ["x" * 900_000]}), "metadata.name"),
    ("template-nested-40-levels", job({"template": nested(40)}), "spec.template: is nested deeper than 32"),
    (
        "env-value-from-nested-40-levels",
        job({"env": [{"name": "A", "valueFrom": nested(40)}]}),
        "spec.env[0].valueFrom: is nested deeper than 32",
    ),
    ("spec-over-100-kib", job({"args": ["x" * 1000] * 110}), "KiB of JSON; at most 100 KiB"),
]


def _write(tmp_path, doc: Any):
    path = tmp_path / "job.yaml"
    if isinstance(doc, bytes):
        path.write_bytes(doc)
    elif isinstance(doc, str):
        path.write_text(doc, encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def test_there_are_at_least_60_hostile_inputs() -> None:
    assert len(CASES) >= 60 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("doc, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_input_is_one_line_naming_the_field(doc: Any, expected: str, tmp_path, capsys) -> None:
    path = _write(tmp_path, doc)
    assert main(["validate", str(path)]) == 1
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1, err[:2000]
    assert expected in lines[0] and str(path) in lines[0], lines[0][:500]
    assert "Traceback" not in err and len(lines[0]) < 2000


def test_metadata_generation_is_ignored_but_must_decode_as_the_api_server_decodes_it(tmp_path, capsys) -> None:
    # The server sets generation itself, but refuses (400) a body where it is no int64.
    assert main(["validate", str(_write(tmp_path, job(metadata={"generation": 7})))]) == 0
    path = _write(tmp_path, job(metadata={"generation": "seven"}))
    assert main(["validate", str(path)]) == 1
    assert (
        capsys.readouterr().err.splitlines()[-1]
        == f"{path}: metadata.generation: must be an integer (int64) (got 'seven')"
    )


def test_a_utf8_bom_is_fine(tmp_path) -> None:
    path = _write(tmp_path, b"\xef\xbb\xbf" + (HEAD + "spec:\n  image: img\n").encode())
    assert main(["validate", str(path)]) == 0


@pytest.mark.parametrize("case_id", ["alias-bomb", "deep-nesting", "latin-1", "template-containers-a-map"])
def test_the_console_script_prints_no_traceback(case_id: str, tmp_path) -> None:
    doc, expected = next(c[1:] for c in CASES if c[0] == case_id)
    path = _write(tmp_path, doc)
    proc = subprocess.run(
        [sys.executable, "-m", "ddpjob.cli", "validate", str(path)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and expected in proc.stderr
