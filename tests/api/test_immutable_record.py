"""The record of the immutable fields the operator keeps in status.immutableSpec."""
from __future__ import annotations

from ddpjob.api import spec


def job(**fields) -> spec.DDPJob:
    return spec.parse_job({"apiVersion": "ddpjob.io/v1alpha1", "kind": "DDPJob", "metadata": {"name": "j"},
                           "spec": {"image": "i", **fields}})


def test_a_change_to_each_immutable_field_is_named() -> None:
    recorded = spec.immutable_record(job(nodes=2, command=["ddpjob-launch"], args=["a"]))
    assert spec.immutable_changes(recorded, job(nodes=2, command=["ddpjob-launch"], args=["a"])) == []
    changed = job(nodes=3, image="other", command=["torchrun"], args=[], gpusPerNode=1, nprocPerNode=2)
    assert [e.path for e in spec.immutable_changes(recorded, changed)] == [
        f"spec.{f}" for f in spec.IMMUTABLE_FIELDS]
    # Removing the command is a change too; 'auto' is compared as resolved.
    assert [e.path for e in spec.immutable_changes(recorded, job(nodes=2, args=["a"]))] == ["spec.command"]
    assert spec.immutable_changes(spec.immutable_record(job()), job(nprocPerNode=1, backend="gloo")) == []


def test_no_record_no_check() -> None:
    assert spec.immutable_changes(None, job(nodes=9)) == []
    assert spec.immutable_changes("garbage", job(nodes=9)) == []
