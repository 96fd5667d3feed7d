"""The CRD (what `kubectl apply` enforces) and ddpjob.api.spec reject the same objects
for the same fields, and agree on which changes an update may make.

The CRD side is the real kube-apiserver's (the worker's control plane, the CRD installed
once): each body sent as a server-side dry run with strict field validation, as `kubectl
apply` sends it, so the structural schema, its defaults and every CEL rule are the server's
own (tests/support/real_crd.py).
"""

import copy

import pytest

from ddpjob.api import spec
from tests.api.bad_jobs import BAD, GOOD, job, top_level
from tests.conftest import project_crd
from tests.support import real_crd

CASES = BAD + GOOD
# What the server says beside the case's own field, and why. A body of another kind is not
# defaulted, so the rules that read defaulted fields (backend) fail to evaluate on the spec.
SERVER_ALSO = {"kind-wrong": {"spec"}}


@pytest.fixture
def crd(ddpjob_validator):
    return ddpjob_validator


def field_of(error) -> str:
    """A rule on the root object has no field path on a real API server (a root rule's
    fieldPath may only name a field of the schema, and metadata.name is not one): its
    message names the field it is about."""
    path = str(error.path)
    if path == "(root)" and "metadata.name" in error.message:
        path = "metadata.name"  # both root rules are about the name (the CRD's comments say so)
    return top_level(path)


def fields(errors) -> set[str]:
    return {field_of(e) for e in errors}


def show(errors) -> list[str]:
    return [f"{e.path}: {e.message}" for e in errors]


@pytest.mark.parametrize("case", CASES, ids=[("bad:" if c in BAD else "good:") + c.id for c in CASES])
def test_python_and_the_crd_agree(case, crd):
    doc = case.document()
    py, kube = spec.validate(doc), crd.validate(doc)
    assert bool(py) == (case in BAD), show(py)
    assert bool(kube) == (case in BAD), show(kube)
    assert fields(py) | SERVER_ALSO.get(case.id, set()) == fields(kube), (show(py), show(kube))
    if case in BAD:
        assert top_level(case.path) in fields(kube)


# Where a rule is written twice (CEL in the CRD, Python in spec.py), the two messages must
# say the same thing: one word each must share.
SAME_SUBSTANCE = {
    "env-reserved-master-addr": "reserved",
    "env-reserved-backend": "reserved",
    "nccl-without-gpus": "gpusPerNode > 0",
    "nccl-more-procs-than-gpus": "own GPU",
    "nproc-many": "'auto'",
    "checkpoint-both": "exactly one of claimName or volume",
    "checkpoint-neither": "exactly one of claimName or volume",
    "tensorboard-without-checkpoint": "needs spec.checkpoint",
    "name-upper-case": "DNS-1035",
    "name-starts-with-a-digit": "DNS-1035",
    "name-too-long-for-ten-nodes": "63",
    "env-duplicate-name": "FOO",
    "queue-with-native-gang": "only volcano and kueue",
    "kueue-without-queue": "LocalQueue",
    "min-available-below-nodes": "must equal spec.nodes",
    "on-timeout-fail-without-timeout": "needs scheduleTimeoutSeconds",
    "elastic-min-above-max": "<= spec.elastic.maxNodes",
    "elastic-nodes-below-min": "spec.elastic.minNodes",
    "elastic-min-available-is-nodes": "must equal spec.elastic.minNodes",
}


@pytest.mark.parametrize("case_id, word", SAME_SUBSTANCE.items())
def test_messages_match_in_substance(case_id, word, crd):
    case = next(c for c in BAD if c.id == case_id)
    field = top_level(case.path)
    py = [e.message for e in spec.validate(case.document()) if top_level(e.path) == field]
    kube = [e.message for e in crd.validate(case.document()) if field_of(e) == field]
    assert any(word in m for m in py), py
    assert any(word in m for m in kube), kube


def test_the_immutable_fields_are_the_same_on_both_sides():
    rules = real_crd.rules(project_crd())
    transition = {r.path.removeprefix("spec.") for r in rules if "oldSelf" in r.rule and r.path != "spec"}
    # nodes' rule is on the spec (it may change in an elastic job); elastic is immutable whole.
    assert transition == set(spec.IMMUTABLE_FIELDS) - {"nodes"} | {"elastic"}
    spec_rules = [r.rule for r in rules if "oldSelf" in r.rule and r.path == "spec"]
    assert "has(self.elastic) || self.nodes == oldSelf.nodes" in spec_rules
    schema = real_crd.schema_of(project_crd())["properties"]["spec"]["properties"]
    for key, default in spec.IMMUTABLE_DEFAULTS.items():
        assert schema[key]["default"] == default, key
    assert set(schema) == set(spec.SPEC_FIELDS)


OLD = job({"nodes": 2, "nprocPerNode": 2, "backend": "gloo", "args": ["--epochs", "1"]})

# (what changes, the spec keys to set (None removes), the field that must be named)
IMMUTABLE_CHANGES = [
    ("nodes", {"nodes": 3}, "spec.nodes"),
    ("nodes-to-default", {"nodes": None}, "spec.nodes"),
    ("nproc", {"nprocPerNode": 1}, "spec.nprocPerNode"),
    ("nproc-to-auto", {"nprocPerNode": "auto"}, "spec.nprocPerNode"),
    ("backend", {"backend": "auto"}, "spec.backend"),
    ("backend-removed", {"backend": None}, "spec.backend"),
    ("image", {"image": "ddpjob/trainer:0.2.0"}, "spec.image"),
    ("command", {"command": ["sh", "-c", "true"]}, "spec.command"),
    ("command-removed", {"command": None}, "spec.command"),
    ("args", {"args": ["--epochs", "2"]}, "spec.args"),
    ("args-removed", {"args": None}, "spec.args"),
    ("gpus", {"gpusPerNode": 1}, "spec.gpusPerNode"),
]

MUTABLE_CHANGES = [
    ("suspend", {"suspend": True}),
    ("max-restarts", {"maxRestarts": 9}),
    ("deadline", {"activeDeadlineSeconds": 60}),
    ("restart-policy", {"restartPolicy": "Never"}),
    ("env", {"env": [{"name": "A", "value": "b"}]}),
    ("template", {"template": {"spec": {"nodeSelector": {"pool": "x"}}}}),
    ("same-values-spelled-out", {"gpusPerNode": 0}),
]


def changed(old: dict, changes: dict) -> dict:
    new = copy.deepcopy(old)
    for key, value in changes.items():
        if value is None:
            new["spec"].pop(key, None)
        else:
            new["spec"][key] = value
    return new


def olds(crd):
    """The old object as the user wrote it and as the API server stored it (defaulted)."""
    return [("as-written", OLD), ("as-stored", crd.defaulted(OLD))]


@pytest.mark.parametrize("what, changes, path", IMMUTABLE_CHANGES, ids=[c[0] for c in IMMUTABLE_CHANGES])
def test_an_immutable_field_cannot_change(what, changes, path, crd):
    new = changed(OLD, changes)
    assert spec.validate(new) == [] and crd.validate(new) == []  # the new object alone is fine
    for label, old in olds(crd):
        assert show(spec.validate_update(old, new)) == [f"{path}: is immutable"], label
    assert [e.path for e in crd.validate(new, old=OLD)] == [path]


def test_an_immutable_field_cannot_be_added(crd):
    old = changed(OLD, {"command": None, "args": None})
    new = changed(old, {"command": ["sh"], "args": ["x"]})
    assert sorted(e.path for e in spec.validate_update(old, new)) == ["spec.args", "spec.command"]
    assert sorted(e.path for e in crd.validate(new, old=old)) == ["spec.args", "spec.command"]


@pytest.mark.parametrize("what, changes", MUTABLE_CHANGES, ids=[c[0] for c in MUTABLE_CHANGES])
def test_a_mutable_field_may_change(what, changes, crd):
    new = changed(OLD, changes)
    for label, old in olds(crd):
        assert spec.validate_update(old, new) == [], label
    assert crd.validate(new, old=OLD) == []


def test_an_update_that_spells_out_defaults_is_no_change(crd):
    bare = job({"nodes": None, "nprocPerNode": None, "command": None})
    bare["spec"] = {k: v for k, v in bare["spec"].items() if v is not None}
    stored = crd.defaulted(bare)
    assert spec.validate_update(bare, stored) == [] and crd.validate(stored, old=bare) == []
    assert spec.validate_update(stored, bare) == [] and crd.validate(bare, old=stored) == []


ELASTIC = job({"nodes": 4, "elastic": {"minNodes": 2, "maxNodes": 4}, "args": ["--epochs", "1"]})

# (what changes, the spec keys to set (None removes), the field that must be named)
ELASTIC_IMMUTABLE = [
    ("range-moved", {"elastic": {"minNodes": 1, "maxNodes": 4}}, "spec.elastic"),
    ("range-removed", {"elastic": None}, "spec.elastic"),
]


@pytest.mark.parametrize("what, changes, path", ELASTIC_IMMUTABLE, ids=[c[0] for c in ELASTIC_IMMUTABLE])
def test_an_elastic_range_cannot_change(what, changes, path, crd):
    new = changed(ELASTIC, changes)
    assert spec.validate(new) == [] and crd.validate(new) == []
    assert [e.path for e in spec.validate_update(ELASTIC, new)] == [path]
    assert path in [e.path for e in crd.validate(new, old=ELASTIC)]


def test_an_elastic_range_cannot_be_added(crd):
    new = changed(OLD, {"elastic": {"minNodes": 1, "maxNodes": 2}})
    assert [e.path for e in spec.validate_update(OLD, new)] == ["spec.elastic"]
    assert [e.path for e in crd.validate(new, old=OLD)] == ["spec.elastic"]


@pytest.mark.parametrize("nodes", [2, 3])
def test_an_elastic_job_may_change_its_size_within_the_range(nodes, crd):
    new = changed(ELASTIC, {"nodes": nodes})
    assert spec.validate_update(ELASTIC, new) == [] and crd.validate(new, old=ELASTIC) == []


def test_an_elastic_job_may_not_leave_its_range(crd):
    new = changed(ELASTIC, {"nodes": 5})
    assert [e.path for e in spec.validate_update(ELASTIC, new)] == ["spec.nodes"]
    assert [e.path for e in crd.validate(new, old=ELASTIC)] == ["spec.nodes"]
