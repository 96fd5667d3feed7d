"""The template's trainer container may not set the environment contract's names, as
`spec.env` may not (issue 40, low 6): its env reaches the same process, after the
operator's, and a name the operator does not set there (DDPJOB_CHECKPOINT_DIR without a
checkpoint) was the user's to say."""

from __future__ import annotations

from typing import Any

import pytest

from ddpjob import contract
from ddpjob.api import spec


def job(*containers: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {"name": "j"},
        "spec": {"image": "img", "template": {"spec": {"containers": list(containers)}}},
    }


@pytest.mark.parametrize("name", ["DDPJOB_CHECKPOINT_DIR", "MASTER_ADDR", "DDPJOB_NOTICE_TOKEN", "PET_NNODES"])
def test_a_reserved_name_in_the_trainers_template_env_is_refused_naming_the_field(name: str) -> None:
    assert name in contract.RESERVED
    body = job({"name": "trainer", "env": [{"name": "OK", "value": "1"}, {"name": name, "value": "/x"}]})
    with pytest.raises(spec.InvalidSpec) as refused:
        spec.parse_job(body)
    assert [str(e) for e in refused.value.errors] == [
        f"spec.template.spec.containers[0].env[1].name: {name} is reserved by the rendezvous contract and set by ddpjob"
    ]


def test_other_containers_and_other_names_are_the_users() -> None:
    body = job(
        {"name": "side", "image": "busybox", "env": [{"name": "DDPJOB_CHECKPOINT_DIR", "value": "/x"}]},
        {"name": "trainer", "env": [{"name": "WANDB_PROJECT", "value": "p"}]},
    )
    assert spec.parse_job(body).template["spec"]["containers"][1]["env"][0]["name"] == "WANDB_PROJECT"
