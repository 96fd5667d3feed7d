"""ddpjob_devcluster/apiserver/crd_validator.py: the stand-in for the API server must itself be right."""

import copy

import pytest

from ddpjob_devcluster.apiserver.crd_validator import CRDValidator, load
from tests.conftest import load_example


def make_crd(spec_schema: dict, root_rules: list | None = None) -> CRDValidator:
    schema = {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec_schema,
            "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
        },
    }
    if root_rules:
        schema["x-kubernetes-validations"] = root_rules
    return CRDValidator(
        {
            "metadata": {"name": "widgets.example.io"},
            "spec": {
                "group": "example.io",
                "names": {"kind": "Widget", "plural": "widgets"},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "subresources": {"status": {}},
                        "schema": {"openAPIV3Schema": schema},
                    }
                ],
            },
        }
    )


def widget(**spec):
    return {"apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec}


def paths(errors):
    return [e.path for e in errors]


SCHEMA = {
    "type": "object",
    "properties": {
        "count": {"type": "integer", "minimum": 1, "maximum": 10, "default": 2},
        "size": {"x-kubernetes-int-or-string": True},
        "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
        "name": {"type": "string", "minLength": 1, "pattern": "^[a-z]+$"},
        "flag": {"type": "boolean"},
        "items": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["key"],
            "items": {
                "type": "object",
                "required": ["key"],
                "properties": {"key": {"type": "string"}, "n": {"type": "integer", "default": 7}},
                "x-kubernetes-validations": [{"rule": "self.n < 100", "message": "n too big"}],
            },
        },
        "nested": {"type": "object", "properties": {"inner": {"type": "string", "default": "x"}}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "quantities": {"type": "object", "additionalProperties": {"x-kubernetes-int-or-string": True}},
    },
}


@pytest.fixture
def v():
    return make_crd(copy.deepcopy(SCHEMA))


def test_the_project_crd_compiles_and_accepts_both_examples():
    crd = load()
    assert crd.compile_errors() == []
    assert len(crd.rules()) >= 10
    for name in ("mnist-cpu.yaml", "resnet-gpu.yaml"):
        assert crd.validate(load_example(name)) == []


def test_defaults_are_applied_recursively_and_nulls_pruned_first(v):
    out = v.defaulted(widget(count=None, nested={}, items=[{"key": "k"}]))
    assert out["spec"]["count"] == 2 and out["spec"]["mode"] == "a"
    assert out["spec"]["nested"] == {"inner": "x"} and out["spec"]["items"] == [{"key": "k", "n": 7}]
    assert "nested" not in v.defaulted(widget())["spec"]  # no default for the object itself
    body = load()
    job = body.defaulted({"spec": {"image": "i", "checkpoint": {"claimName": "c"}}})
    assert job["spec"]["nodes"] == 1 and job["spec"]["port"] == 29500 and job["spec"]["backend"] == "auto"
    assert job["spec"]["checkpoint"]["mountPath"] == "/checkpoints"


def test_status_sent_to_the_main_resource_is_dropped(v):
    assert "status" not in v.defaulted({**widget(), "status": {"phase": 3}})
    assert v.validate({**widget(), "status": {"phase": 3}}) == []


@pytest.mark.parametrize(
    "spec, path",
    [
        ({"count": "2"}, "spec.count"),
        ({"count": 1.5}, "spec.count"),
        ({"count": True}, "spec.count"),
        ({"count": 0}, "spec.count"),
        ({"count": 11}, "spec.count"),
        ({"size": True}, "spec.size"),
        ({"size": 1.5}, "spec.size"),
        ({"mode": "c"}, "spec.mode"),
        ({"name": ""}, "spec.name"),
        ({"name": "Abc"}, "spec.name"),
        ({"name": "abc\n"}, "spec.name"),  # RE2: '$' is the end of the text, unlike Python's re
        ({"flag": "yes"}, "spec.flag"),
        ({"items": {"key": "k"}}, "spec.items"),
        ({"items": [{"n": 1}]}, "spec.items[0].key"),
        ({"items": [{"key": "k"}, {"key": "k"}]}, "spec.items[1]"),
        ({"quantities": {"cpu": [1]}}, "spec.quantities.cpu"),
        ({"nested": "x"}, "spec.nested"),
    ],
)
def test_the_openapi_part_rejects_with_the_field_path(v, spec, path):
    assert path in paths(v.validate(widget(**spec)))


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"size": 3},
        {"size": "3Gi"},
        {"count": 10, "mode": "b", "name": "abc", "flag": False},
        {"items": [{"key": "a"}, {"key": "b", "n": 99}]},
        {"free": {"anything": [1, {"goes": None}]}},
        {"quantities": {"cpu": 2, "memory": "1Gi"}},
        {"count": None},
    ],
)
def test_good_objects_pass(v, spec):
    assert v.validate(widget(**spec)) == []


def test_unknown_fields_fail_alone_like_strict_field_validation(v):
    errors = v.validate(widget(cuont=3, count=0, nested={"iner": 1}, items=[{"key": "k", "m": 1}]))
    assert sorted(paths(errors)) == ["spec.cuont", "spec.items[0].m", "spec.nested.iner"]
    assert all("unknown field" in e.message for e in errors)
    assert paths(v.validate({**widget(), "extra": 1})) == ["extra"]


def test_required_spec_and_root_shape(v):
    assert paths(v.validate({"apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": "w"}})) == ["spec"]
    assert paths(v.validate(["not", "an", "object"])) == ["(root)"]


def test_routing_object_meta(v):
    assert paths(v.validate({**widget(), "apiVersion": "example.io/v2"})) == ["apiVersion"]
    assert paths(v.validate({**widget(), "kind": "Gadget"})) == ["kind"]
    assert paths(v.validate({**widget(), "metadata": {}})) == ["metadata.name"]
    assert paths(v.validate({**widget(), "metadata": {"name": "Not_A_Name"}})) == ["metadata.name"]
    assert paths(v.validate({**widget(), "metadata": {"name": "w", "namespace": "NS"}})) == ["metadata.namespace"]
    assert v.validate({**widget(), "metadata": {"name": "a.b.c", "labels": {"x": "y"}}}) == []


def rule_crd(*rules, root_rules=None, **props):
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "default": 1},
            "b": {"type": "integer", "default": 1},
            "s": {"type": "string"},
            **props,
        },
        "x-kubernetes-validations": list(rules),
    }
    return make_crd(schema, root_rules)


def test_a_false_rule_is_reported_at_its_field_path_with_its_message():
    v = rule_crd({"rule": "self.a <= self.b", "message": "a must be <= b", "fieldPath": ".a"}, {"rule": "self.a != 5"})
    assert v.validate(widget(a=1, b=2)) == []
    assert [tuple(e) for e in v.validate(widget(a=3, b=2))] == [("spec.a", "a must be <= b")]
    assert [tuple(e) for e in v.validate(widget(a=5, b=9))] == [("spec", "failed rule: self.a != 5")]


def test_rules_see_defaults_and_message_expressions():
    v = rule_crd({"rule": "self.a == 1", "messageExpression": "'a is ' + string(self.a)"})
    assert v.validate(widget()) == []  # a defaults to 1
    assert [e.message for e in v.validate(widget(a=4))] == ["a is 4"]


def test_a_broken_cel_expression_is_reported():
    v = rule_crd({"rule": "self.a ==== 1", "message": "never"})
    assert paths(v.compile_errors()) == ["spec"]
    errors = v.validate(widget())
    assert paths(errors) == ["spec"] and "does not compile" in errors[0].message


def test_a_rule_that_cannot_be_evaluated_is_reported():
    v = rule_crd({"rule": "self.s.startsWith('x')", "message": "s"})  # s has no default
    errors = v.validate(widget())
    assert paths(errors) == ["spec"] and "could not be evaluated" in errors[0].message


def test_no_rule_runs_after_a_type_or_enum_error_but_after_a_range_error_they_do():
    v = rule_crd({"rule": "self.b == 1", "message": "b"}, c={"type": "integer", "minimum": 0})
    assert paths(v.validate(widget(a="x", b=2))) == ["spec.a"]
    assert sorted(paths(v.validate(widget(c=-1, b=2)))) == ["spec", "spec.c"]


def test_root_rules_see_only_metadata_name():
    v = rule_crd(
        root_rules=[
            {"rule": "self.metadata.name.size() < 5", "message": "short", "fieldPath": ".metadata.name"},
            {"rule": "!has(self.metadata.namespace)", "message": "namespace is hidden"},
        ]
    )
    body = {**widget(), "metadata": {"name": "w", "namespace": "default"}}
    assert v.validate(body) == []
    assert [tuple(e) for e in v.validate({**body, "metadata": {"name": "longer"}})] == [("metadata.name", "short")]


def test_transition_rules_run_only_on_update_with_an_old_value():
    v = rule_crd(
        s={"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "immutable"}]},
        items={
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["k"],
            "items": {
                "type": "object",
                "required": ["k"],
                "properties": {"k": {"type": "string"}, "v": {"type": "string"}},
                "x-kubernetes-validations": [{"rule": "self.v == oldSelf.v", "message": "v frozen"}],
            },
        },
    )
    assert v.validate(widget(s="new")) == []  # create: no oldSelf
    assert v.validate(widget(s="new"), old=widget()) == []  # old had no value there
    assert [tuple(e) for e in v.validate(widget(s="new"), old=widget(s="old"))] == [("spec.s", "immutable")]
    old = widget(items=[{"k": "a", "v": "1"}, {"k": "b", "v": "2"}])
    assert v.validate(widget(items=[{"k": "b", "v": "2"}, {"k": "a", "v": "1"}, {"k": "c", "v": "3"}]), old) == []
    assert paths(v.validate(widget(items=[{"k": "b", "v": "9"}]), old)) == ["spec.items[0]"]


def test_the_project_crd_transition_rules():
    crd = load()
    old = load_example("mnist-cpu.yaml")
    assert crd.validate(old, old) == []
    new = copy.deepcopy(old)
    new["spec"].update(nodes=3, maxRestarts=9, suspend=True)
    # The API server writes the field before the message: the message does not repeat it
    # (a real one said "spec.nodes: Invalid value: 3: spec.nodes: is immutable").
    assert [tuple(e) for e in crd.validate(new, old)] == [("spec.nodes", "is immutable")]


def test_a_validator_leaves_a_raised_recursion_limit_raised():
    """celpy lowers the process's limit to 2500 when it makes an environment: in one process
    with the operator (tests, the emulator's demo) that undid the operator's 40,000."""
    import sys

    before = sys.getrecursionlimit()
    sys.setrecursionlimit(40_000)
    try:
        CRDValidator.from_file()
        assert sys.getrecursionlimit() == 40_000
    finally:
        sys.setrecursionlimit(before)


def test_a_validator_never_changes_the_recursion_limit_while_it_is_made(monkeypatch):
    """A limit changed while another thread builds an AST breaks that parse (CPython's
    'AST constructor recursion depth mismatch' SystemError, seen in `make test` when an
    emulator thread made a validator beside tests/test_import_boundaries.py's ast.parse):
    the CEL environment is made once, at import, never per validator."""
    import sys

    changes = []
    monkeypatch.setattr(sys, "setrecursionlimit", changes.append)
    CRDValidator.from_file()
    assert changes == []
