"""An unknown field names the field it was probably meant as, and a misspelt field is one
error, not two (`claimname` is not also "set exactly one of claimName or volume")."""

from __future__ import annotations

import pytest

from ddpjob import cli
from ddpjob.api import field_names, spec
from tests.api.bad_jobs import DROP, job


def errors_of(body) -> list[str]:
    return [str(e) for e in spec.validate(body)]


@pytest.mark.parametrize(
    "changes, expected",
    [
        ({"nprocPerNode": DROP, "nprocPerNod": 2}, "spec.nprocPerNod: unknown field; did you mean nprocPerNode?"),
        ({"nodes": DROP, "node": 2}, "spec.node: unknown field; did you mean nodes?"),
        ({"env": [{"name": "A", "vaule": "1"}]}, "spec.env[0].vaule: unknown field; did you mean value?"),
        ({"resources": {"Limits": {}}}, "spec.resources.Limits: unknown field; did you mean limits?"),
        (
            {"scheduling": {"gang": "volcano", "qeueu": "q"}},
            "spec.scheduling.qeueu: unknown field; did you mean queue?",
        ),
        (
            {"template": {"spec": {"nodeselector": {}}}},
            "spec.template.spec.nodeselector: unknown field in PodSpec; did you mean nodeSelector?",
        ),
    ],
)
def test_an_unknown_field_names_the_field_it_was_meant_as(changes, expected):
    assert errors_of(job(changes)) == [expected]


def test_a_misspelt_claim_name_is_one_error():
    assert errors_of(job({"checkpoint": {"claimname": "ckpt"}})) == [
        "spec.checkpoint.claimname: unknown field; did you mean claimName?"
    ]


def test_a_misspelt_required_field_is_not_also_missing():
    assert errors_of(job({"nodes": 2, "elastic": {"minNode": 1, "maxNodes": 2}})) == [
        "spec.elastic.minNode: unknown field; did you mean minNodes?"
    ]


def test_an_unrelated_unknown_field_leaves_the_real_mistake_said():
    # `size` is no spelling of claimName or volume: the missing source is still the error.
    assert errors_of(job({"checkpoint": {"size": "1Gi"}})) == [
        "spec.checkpoint.size: unknown field (known: claimName, mountPath, volume)",
        "spec.checkpoint: set exactly one of claimName or volume",
    ]


def test_no_guess_without_a_close_name_or_for_a_field_already_set():
    assert errors_of(job({"gpus": 1})) == ["spec.gpus: unknown field"]
    # `nodes` is set, so `node` beside it is not a misspelling of it.
    assert errors_of(job({"nodes": 1, "node": 2})) == ["spec.node: unknown field"]
    assert field_names.closest("x" * 10_000, ["nodes"]) is None  # bounded work for a hostile key
    assert field_names.closest(7, ["nodes"]) is None


def test_validate_prints_the_suggestion(tmp_path, capsys):
    path = tmp_path / "job.yaml"
    path.write_text(
        "apiVersion: ddpjob.io/v1alpha1\nkind: DDPJob\nmetadata: {name: j}\n"
        "spec: {image: i, nprocPerNod: 2, checkpoint: {claimname: ckpt}}\n"
    )
    assert cli.main(["validate", str(path)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"{path}: spec.nprocPerNod: unknown field; did you mean nprocPerNode?",
        f"{path}: spec.checkpoint.claimname: unknown field; did you mean claimName?",
    ]
