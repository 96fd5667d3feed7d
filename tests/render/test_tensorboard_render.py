"""spec.tensorboard's Deployment and Service (ddpjob.render.tensorboard): owned by the job,
restricted Pod Security, the checkpoint read-only, what runs it from the operator's
configuration, and never one of the gang's Pods."""

from __future__ import annotations

from collections.abc import Callable

import kubernetes_validate
import pytest

from ddpjob.api import names, tensorboard
from ddpjob.api.spec import parse_job
from ddpjob.render import tensorboard as render
from ddpjob.render.tensorboard import TensorBoardConfig

K8S_VERSION = "1.33.0"  # as tests/render/test_render.py: the schemas kubernetes-validate ships


def body(name: str = "mnist", **spec) -> dict:
    return {
        "apiVersion": names.API_VERSION,
        "kind": names.KIND,
        "metadata": {"name": name, "namespace": "team-a", "uid": "uid-1"},
        "spec": {
            "image": "ddpjob/trainer:0.2.0-cpu",
            "tensorboard": True,
            "checkpoint": {"claimName": "ckpt", "mountPath": "/ckpt"},
            **spec,
        },
    }


def objects(config: TensorBoardConfig = render.DEFAULT_CONFIG, **spec) -> tuple[dict, dict]:
    service, deployment = everything(config, **spec)[1:]
    return service, deployment


def everything(config: TensorBoardConfig = render.DEFAULT_CONFIG, **spec) -> list[dict]:
    made = render.render(parse_job(body(**spec)), config)
    assert [obj["kind"] for obj in made] == ["NetworkPolicy", "Service", "Deployment"]  # the policy before its Pod
    return made


def pod_spec(deployment: dict) -> dict:
    return deployment["spec"]["template"]["spec"]


def test_nothing_without_the_field() -> None:
    assert render.render(parse_job(body(tensorboard=False))) == []
    job = body()
    del job["spec"]["tensorboard"]
    assert render.render(parse_job(job)) == []


def test_all_are_valid_kubernetes_objects() -> None:
    for obj in everything():
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def test_all_are_owned_by_the_job_and_named_for_it() -> None:
    for obj in everything():
        meta = obj["metadata"]
        assert meta["name"] == "mnist-tensorboard" and meta["namespace"] == "team-a"
        (owner,) = meta["ownerReferences"]
        assert owner["uid"] == "uid-1" and owner["kind"] == names.KIND and owner["controller"] is True


def test_the_pod_meets_the_restricted_pod_security_standard(pod_admission: Callable[[dict, str], str]) -> None:
    _, deployment = objects()
    assert pod_admission(pod_spec(deployment), "restricted") == ""
    # The check itself can fail: the same Pod with escalation allowed is refused.
    loose = pod_spec(deployment)
    loose["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = True
    assert "allowPrivilegeEscalation != false" in pod_admission(loose, "restricted")
    spec = pod_spec(objects()[1])
    assert spec["automountServiceAccountToken"] is False
    assert spec["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_checkpoint_claim_is_read_only_and_the_logdir_is_its_tensorboard_folder() -> None:
    _, deployment = objects()
    spec = pod_spec(deployment)
    (container,) = spec["containers"]
    volume = next(v for v in spec["volumes"] if v["name"] == "checkpoint")
    assert volume["persistentVolumeClaim"] == {"claimName": "ckpt", "readOnly": True}
    mount = next(m for m in container["volumeMounts"] if m["name"] == "checkpoint")
    assert mount == {"name": "checkpoint", "mountPath": "/ckpt", "readOnly": True}
    assert container["command"] == ["python", "-m", "ddpjob_trainer.tensorboard_serve"]
    assert container["args"][:2] == ["--logdir", "/ckpt/tensorboard"]
    assert "--bind_all" in container["args"]  # localhost too: kubectl port-forward connects there


def test_another_volume_source_is_mounted_read_only() -> None:
    nfs = {"nfs": {"server": "nfs.example", "path": "/runs"}}
    _, deployment = objects(checkpoint={"volume": nfs})
    spec = pod_spec(deployment)
    assert next(v for v in spec["volumes"] if v["name"] == "checkpoint") == {"name": "checkpoint", **nfs}
    mount = next(m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "checkpoint")
    assert mount["readOnly"] is True and mount["mountPath"] == "/checkpoints"


def test_the_service_selects_the_tensorboard_pod_and_no_training_pod() -> None:
    service, deployment = objects()
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    # The job label makes a Pod one of the gang's (the operator's Pod index, the headless Service).
    assert names.LABEL_JOB_NAME not in labels and names.LABEL_JOB_NAME not in service["spec"]["selector"]
    assert service["spec"]["ports"][0]["port"] == tensorboard.PORT
    assert deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] == tensorboard.PORT


def test_the_image_resources_and_pull_policy_are_the_operators() -> None:
    config = TensorBoardConfig("registry.example/tb:1", "Always", {"limits": {"cpu": "2"}})
    (container,) = pod_spec(objects(config)[1])["containers"]
    assert container["image"] == "registry.example/tb:1"
    assert container["imagePullPolicy"] == "Always"
    assert container["resources"] == {"limits": {"cpu": "2"}}
    default = pod_spec(objects()[1])["containers"][0]
    assert default["image"] == "ddpjob/trainer:0.2.0-cpu" and "imagePullPolicy" not in default


@pytest.mark.parametrize("job", ["a", "a" * 50, "a" * 61, "b" + "-x" * 30])
def test_the_name_is_a_service_name_for_every_job_name(job: str) -> None:
    name = tensorboard.object_name(job)
    assert names.is_dns1035_label(name), name
    assert name.endswith("-tensorboard")


def test_two_long_names_with_one_head_get_two_names() -> None:
    assert tensorboard.object_name("a" * 60 + "x") != tensorboard.object_name("a" * 60 + "y")


def test_the_url_is_the_services_dns_name_and_port() -> None:
    assert tensorboard.url("mnist", "team-a") == "http://mnist-tensorboard.team-a.svc:6006/"


def test_nothing_reaches_its_pod_over_the_pod_network() -> None:
    """A ClusterIP Service answers every Pod of the cluster: the job's curves, run names and
    hyperparameters. Port-forward goes through the kubelet, inside the Pod's network."""
    policy, _, deployment = everything()
    assert policy["spec"] == {
        "podSelector": {"matchLabels": {tensorboard.LABEL_FOR: "mnist"}},
        "policyTypes": ["Ingress"],
        "ingress": [],
    }
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
