"""The operator judges a job's immutable fields against what it accepted itself (the status
it wrote, else its memory of the first pass), never against kopf's annotation, which any
user who may patch the job can rewrite (issue 40, medium 2)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ddpjob.api import accepted_spec, spec
from ddpjob.job import lifecycle
from ddpjob.operator import observer
from ddpjob.operator.observer import JobMemory


def body(generation: int = 1, status: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {
            "name": "j",
            "namespace": "ns",
            "uid": "u1",
            "generation": generation,
            "annotations": {"ddpjob.io/last-handled-configuration": '{"spec": {"image": "evil/image", "nodes": 7}}'},
        },
        "spec": {"image": "img:1", "nodes": 2, "command": ["python", "train.py"], **fields},
        "status": status or {},
    }


def accepted(**fields: Any) -> dict[str, str]:
    return accepted_spec.fingerprint(spec.parse_job(body(**fields)))


def test_a_change_of_spec_beside_a_forged_annotation_is_accepted() -> None:
    """The attack: the owner moves activeDeadlineSeconds (generation 2, observed 1) while
    kopf's annotation holds another image; only the status' digest counts."""
    job = JobMemory(("ns", "j"), uid="u1")
    st = {"phase": "Running", "observedGeneration": 1, accepted_spec.FIELD: accepted()}
    parsed, errors = observer.parse(job, body(2, st, activeDeadlineSeconds=3602), frozenset())
    assert parsed is not None and errors == ()


def test_a_changed_immutable_field_is_refused_against_the_accepted_digest() -> None:
    job = JobMemory(("ns", "j"), uid="u1")
    st = {"phase": "Running", accepted_spec.FIELD: accepted()}
    _, errors = observer.parse(job, body(2, st, image="img:2", args=["--lr", "1"]), frozenset())
    assert errors == ("spec.image: is immutable", "spec.args: is immutable")


def test_before_any_status_the_operators_memory_of_the_first_pass_decides() -> None:
    job = JobMemory(("ns", "j"), uid="u1")
    assert observer.parse(job, body(1), frozenset())[1] == ()  # the first pass accepts, in memory
    assert job.accepted == accepted()
    assert observer.parse(job, body(2, nodes=3), frozenset())[1] == ("spec.nodes: is immutable",)
    job.reset("u2")  # a job made again under the name starts from nothing
    assert job.accepted is None and observer.parse(job, body(1, nodes=3), frozenset())[1] == ()


def test_an_elastic_job_resizes_but_keeps_its_range() -> None:
    elastic = {"elastic": {"minNodes": 1, "maxNodes": 4}}
    st = {accepted_spec.FIELD: accepted(**elastic)}
    assert observer.parse(JobMemory(("ns", "j")), body(2, st, nodes=4, **elastic), frozenset())[1] == ()
    moved = observer.parse(JobMemory(("ns", "j")), body(2, st, elastic={"minNodes": 2, "maxNodes": 4}), frozenset())
    assert moved[1] == ("spec.elastic: is immutable: running Pods were started with this range",)
    removed = observer.parse(JobMemory(("ns", "j")), body(2, st), frozenset())
    assert removed[1] == ("spec.elastic: is immutable: it may not be added or removed",)


def test_every_status_of_a_valid_spec_carries_what_was_accepted() -> None:
    """The job logic writes the digest (job/step.py), so it survives an operator restart."""
    parsed = spec.parse_job(body())
    plan = lifecycle.decide(
        lifecycle.Observed(job=parsed, pods=(), previous={}, now=datetime(2026, 11, 28, 7, tzinfo=UTC), generation=1)
    )
    assert plan.status[accepted_spec.FIELD] == accepted()
    assert len(plan.status[accepted_spec.FIELD]) <= 16 and all(len(d) <= 64 for d in accepted().values())
