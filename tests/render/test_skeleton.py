"""The parsed-once templates give exactly what rendering the text and parsing it gives."""

import jinja2
import pytest

from ddpjob import render
from ddpjob.api.spec import parse_job
from ddpjob.render import objects, skeleton
from tests.conftest import load_example

ODD_VALUES = [
    "yes",
    "no",
    "on",
    "null",
    "~",
    "1e3",
    "0x1F",
    "012",
    "- a",
    "a: b",
    "#x",
    "{x}",
    "'q'",
    '"dq"',
    "<script>&'",
    "tab\there",
    "line\nbreak",
    "ünï",
    "",
    " lead",
    "trail ",
]


def _jobs(job_body):
    yield parse_job(load_example("mnist-cpu.yaml"))
    yield parse_job(load_example("resnet-gpu.yaml"))
    yield parse_job(job_body())
    yield parse_job(job_body(command=None, args=[], workingDir="/w", imagePullPolicy="Always"))
    yield parse_job(job_body(env=[{"name": f"V{i}", "value": v} for i, v in enumerate(ODD_VALUES)], args=ODD_VALUES))
    yield parse_job(
        job_body(
            scheduling={"gang": "volcano", "queue": "q"},
            template={"metadata": {"labels": {"team": "x"}}, "spec": {"nodeSelector": {"a": "b"}}},
        )
    )


def test_every_render_equals_the_text_render(job_body, monkeypatch):
    calls = []
    fast = skeleton.render

    def both(env, template_name, /, **values):
        out = fast(env, template_name, **values)
        calls.append((template_name, out == skeleton.slow_render(env, template_name, **values)))
        return out

    monkeypatch.setattr(skeleton, "render", both)
    for job in _jobs(job_body):
        render.render(job, restart_count=3)
    assert {name for name, _ in calls} == {"pod.yaml.j2", "service.yaml.j2"}
    assert all(same for _, same in calls), [name for name, same in calls if not same]


def test_renders_do_not_share_objects(job_body):
    job = parse_job(job_body())
    first, second = objects.render_pod(job, 0), objects.render_pod(job, 0)
    first["metadata"]["labels"]["changed"] = "yes"
    first["spec"]["containers"][0]["env"].clear()
    assert "changed" not in second["metadata"]["labels"]
    assert objects.render_pod(job, 0) == second


def test_a_branch_not_taken_stays_out(job_body):
    with_args = objects.render_pod(parse_job(job_body()), 0)
    without = objects.render_pod(parse_job(job_body(args=[])), 0)
    assert with_args["spec"]["containers"][0]["args"]
    assert "args" not in without["spec"]["containers"][0]


@pytest.mark.parametrize(
    "text",
    [
        "name: prefix-{{ x | tojson }}\n",  # a value inside a larger scalar
        "name: {{ x }}\n",  # not through tojson
    ],
)
def test_a_template_it_cannot_fill_falls_back_to_the_text(text):
    env = jinja2.Environment(loader=jinja2.DictLoader({"t": text}))
    skeleton.install(env)
    for x in ("abc", "d"):
        assert skeleton.render(env, "t", x=x) == skeleton.slow_render(env, "t", x=x)


def test_a_template_that_looks_into_a_value_falls_back_to_the_text():
    env = jinja2.Environment(
        loader=jinja2.DictLoader({"t": "n: {{ x.a | tojson }}\nl: {{ x | length }}\n"}),
        undefined=jinja2.StrictUndefined,
    )
    skeleton.install(env)
    assert skeleton.render(env, "t", x={"a": [1]}) == {"n": [1], "l": 1}


def test_a_filled_value_is_a_copy_of_the_callers():
    env = jinja2.Environment(loader=jinja2.DictLoader({"t": "v: {{ x | tojson }}\n"}))
    skeleton.install(env)
    value = {"nested": {"list": [1, 2]}, "tuple": (1, 2)}
    out = skeleton.render(env, "t", x=value)
    out["v"]["nested"]["list"].append(3)
    assert value["nested"]["list"] == [1, 2]
    assert out["v"]["tuple"] == [1, 2]  # what tojson and YAML give
