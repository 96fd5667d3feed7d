"""What ddpjob sends is what the real API server takes (the worker's control plane, each
object a server-side dry run): every example DDPJob under manifests/examples, and the
operator's rendered trainer Pods, through Pod validation and the `restricted` Pod
Security level (the chart's own namespace policy may ask for it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml

from ddpjob import render
from ddpjob.api import spec
from tests.api.bad_jobs import EXAMPLES
from tests.support.real_crd import RealCRD

JOB: dict[str, Any] = {
    "apiVersion": "ddpjob.io/v1alpha1",
    "kind": "DDPJob",
    "metadata": {"name": "j", "namespace": "team-a", "uid": "0d1c2b3a-0000-4000-8000-000000000001"},
    "spec": {"nodes": 2, "image": "ddpjob/trainer:0.1.0"},
}
DDPJOB_EXAMPLES = sorted(
    path.name for path in EXAMPLES.glob("*.yaml") if yaml.safe_load(path.read_text()).get("kind") == "DDPJob"
)


@pytest.mark.parametrize("name", DDPJOB_EXAMPLES)
def test_every_example_is_a_job_the_server_takes(name: str, ddpjob_validator: RealCRD) -> None:
    assert ddpjob_validator.validate(yaml.safe_load((EXAMPLES / name).read_text())) == []


def test_the_examples_are_found() -> None:
    assert {"mnist-cpu.yaml", "resnet-gpu.yaml", "elastic-cpu.yaml"} <= set(DDPJOB_EXAMPLES)


@pytest.mark.parametrize(
    "changes",
    [{"gpusPerNode": 2}, {"checkpoint": {"claimName": "ckpt"}}, {"elastic": {"minNodes": 1, "maxNodes": 2}}],
    ids=["gpus", "checkpoint", "elastic"],
)
def test_the_rendered_pod_passes_validation_and_restricted_pod_security(
    changes: dict[str, Any], pod_admission: Callable[[dict, str], str]
) -> None:
    job = spec.parse_job({**JOB, "spec": {**JOB["spec"], **changes}})
    for rank in range(job.nodes):
        assert pod_admission(render.render_pod(job, rank)["spec"], "restricted") == ""


def test_a_privileged_trainer_is_refused_where_restricted_is_enforced(
    pod_admission: Callable[[dict, str], str],
) -> None:
    pod = render.render_pod(spec.parse_job(JOB), 0)["spec"]
    pod["containers"][0]["securityContext"] = {"privileged": True}
    said = pod_admission(pod, "restricted")
    assert 'violates PodSecurity "restricted:latest"' in said, said
    assert pod_admission(pod, "privileged") == ""
