"""The job the Python client creates, built and checked before anything is sent."""

from __future__ import annotations

import pathlib

import pytest
import yaml

from ddpjob.api.job_file import FileError
from ddpjob.api.spec import InvalidSpec
from ddpjob.client import job_body

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_a_few_arguments_make_the_job_a_file_would_say() -> None:
    body = job_body.from_arguments(
        "img",
        ["ddpjob-launch"],
        ["ddpjob-train", "--epochs", "1"],
        2,
        2,
        0,
        {"OMP_NUM_THREADS": "1"},
        {"restart_policy": "ExitCode", "maxRestarts": 1},
    )
    body, job = job_body.checked(body, "mine", "team", None, "train()")
    assert body["metadata"] == {"name": "mine", "namespace": "team"}
    assert body["spec"] == {
        "image": "img",
        "nodes": 2,
        "nprocPerNode": 2,
        "command": ["ddpjob-launch"],
        "args": ["ddpjob-train", "--epochs", "1"],
        "env": [{"name": "OMP_NUM_THREADS", "value": "1"}],
        "restartPolicy": "ExitCode",
        "maxRestarts": 1,
    }
    assert (job.nodes, job.nproc_per_node, job.restart_policy, job.namespace) == (2, 2, "ExitCode", "team")


def test_a_job_without_a_name_gets_one_drawn_that_fits_its_pods() -> None:
    _body, job = job_body.checked(job_body.from_arguments("img", None, (), 1, "auto", 0, {}, {}), None, "ns", None, "x")
    assert job.name.startswith("ddpjob-") and len(job.name) == len("ddpjob-") + 8
    named, _ = job_body.checked(
        {"metadata": {"generateName": "Sweep_7-"}, "spec": {"image": "i"}}, None, "ns", None, "x"
    )
    assert named["metadata"]["name"].startswith("sweep7-") and "generateName" not in named["metadata"]


def test_a_bad_field_is_named_in_either_spelling_and_nothing_is_built() -> None:
    with pytest.raises(InvalidSpec) as bad:
        job_body.checked(
            job_body.from_arguments("img", None, (), 0, "auto", 0, {}, {"restart_polcy": "Never"}),
            "x",
            "ns",
            None,
            "train()",
        )
    said = [str(e) for e in bad.value.errors]
    assert "spec.nodes: must be >= 1 (got 0)" in said
    assert any(e.startswith("spec.restartPolcy: unknown field; did you mean restartPolicy") for e in said), said


def test_the_template_policy_of_submit_applies() -> None:
    body = {"metadata": {"name": "p"}, "spec": {"image": "i", "template": {"spec": {"hostNetwork": True}}}}
    with pytest.raises(InvalidSpec, match=r"spec\.template\.spec\.hostNetwork"):
        job_body.checked(body, None, "ns", None, "x")
    with pytest.raises(InvalidSpec, match="template_allow: "):
        job_body.checked(body, None, "ns", "no-such-allowance", "x")


def test_a_dict_is_copied_and_a_file_holds_one_job(tmp_path: pathlib.Path) -> None:
    given = {"metadata": {"name": "d"}, "spec": {"image": "i"}}
    body, _ = job_body.checked(job_body.from_source(given), "other", "ns", None, "x")
    assert given == {"metadata": {"name": "d"}, "spec": {"image": "i"}} and body["metadata"]["name"] == "other"
    example = job_body.from_source(ROOT / "manifests" / "examples" / "mnist-cpu.yaml")
    assert example["metadata"]["name"] == "mnist-cpu"
    two = tmp_path / "two.yaml"
    two.write_text(yaml.safe_dump_all([given, given]))
    with pytest.raises(FileError, match="holds 2 documents; train\\(\\) creates one DDPJob per call"):
        job_body.from_source(two)


def test_a_job_read_back_from_the_server_is_a_job_to_create_again() -> None:
    read = {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "status": {"phase": "Succeeded"},
        "metadata": {
            "name": "j",
            "uid": "u",
            "resourceVersion": "7",
            "labels": {"a": "b"},
            "managedFields": [{}],
            "creationTimestamp": "2026-11-28T00:00:00Z",
        },
        "spec": {"image": "i"},
    }
    body = job_body.from_source(read)
    assert body["metadata"] == {"name": "j", "labels": {"a": "b"}} and "status" not in body
