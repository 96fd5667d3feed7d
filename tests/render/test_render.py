import os
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from ddpjob import render
from ddpjob.api import names
from ddpjob.api.spec import parse_job
from tests.conftest import load_example

GOLDEN = Path(__file__).parent / "golden"
K8S_VERSION = "1.33.0"  # a supported cluster version; the schemas ship with kubernetes-validate


def golden_check(name: str, objects: list[dict]) -> None:
    """Compare with tests/render/golden/<name>; UPDATE_GOLDEN=1 rewrites it after a deliberate change."""
    path = GOLDEN / name
    text = render.to_yaml_stream(objects)
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run with UPDATE_GOLDEN=1 once and review it"
    assert list(yaml.safe_load_all(path.read_text())) == objects


@pytest.mark.parametrize("example", ["mnist-cpu.yaml", "resnet-gpu.yaml"])
def test_examples_match_golden(example):
    objects = render.render(parse_job(load_example(example)))
    golden_check(example, objects)


@pytest.mark.parametrize("example", ["mnist-cpu.yaml", "resnet-gpu.yaml"])
def test_rendered_objects_pass_the_kubernetes_schema(example, job_body):
    body = load_example(example)
    body["metadata"]["uid"] = "0d1c2b3a-0000-4000-8000-000000000001"
    for obj in render.render(parse_job(body)):
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def test_schema_check_can_fail():
    bad = render.render(parse_job(load_example("mnist-cpu.yaml")))[1]
    bad["spec"]["restartPolicy"] = {"not": "a string"}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)


def test_service_is_headless_and_owned(job_body):
    job = parse_job(job_body())
    svc = render.render_service(job)
    assert svc["metadata"]["name"] == "demo"
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["selector"] == {names.LABEL_JOB_NAME: "demo"}
    assert svc["spec"]["ports"][0]["port"] == 29500
    owner = svc["metadata"]["ownerReferences"][0]
    assert owner == {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "name": "demo",
        "uid": job.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def env_of(pod: dict) -> dict[str, str]:
    trainer = next(c for c in pod["spec"]["containers"] if c["name"] == "trainer")
    return {e["name"]: e["value"] for e in trainer["env"] if "value" in e}


def test_pods_carry_the_environment_contract(job_body):
    job = parse_job(job_body(port=23456))
    objects = render.render(job, restart_count=3)
    pods = objects[1:]
    assert [p["metadata"]["name"] for p in pods] == ["demo-0", "demo-1"]
    for rank, pod in enumerate(pods):
        env = env_of(pod)
        assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == "demo-0.demo.ml.svc"
        assert env["MASTER_PORT"] == env["PET_MASTER_PORT"] == "23456"
        assert env["NNODES"] == env["PET_NNODES"] == "2"
        assert env["NODE_RANK"] == env["PET_NODE_RANK"] == str(rank)
        assert env["NPROC_PER_NODE"] == env["PET_NPROC_PER_NODE"] == "2"
        assert env["WORLD_SIZE"] == "4"
        # With several processes per Pod, torchrun assigns RANK/LOCAL_RANK itself.
        assert "RANK" not in env and "LOCAL_RANK" not in env
        assert env["DDPJOB_NAME"] == "demo" and env["DDPJOB_NAMESPACE"] == "ml"
        assert env["DDPJOB_RESTART_COUNT"] == "3" and env["DDPJOB_BACKEND"] == "gloo"
        assert "DDPJOB_CHECKPOINT_DIR" not in env
        spec = pod["spec"]
        assert spec["hostname"] == f"demo-{rank}" and spec["subdomain"] == "demo"
        assert spec["restartPolicy"] == "Never"
        assert pod["metadata"]["labels"][names.LABEL_NODE_RANK] == str(rank)
        assert pod["metadata"]["labels"][names.LABEL_RESTART_COUNT] == "3"
        assert pod["metadata"]["ownerReferences"][0]["controller"] is True
        shm = next(v for v in spec["volumes"] if v["name"] == "dshm")
        assert shm["emptyDir"]["medium"] == "Memory"


def test_one_process_per_pod_gets_rank_variables(job_body):
    pods = render.render(parse_job(job_body(nodes=3, nprocPerNode=1)))[1:]
    for rank, pod in enumerate(pods):
        env = env_of(pod)
        assert (env["RANK"], env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"], env["WORLD_SIZE"]) == (
            str(rank),
            "0",
            "1",
            "3",
        )


def test_gpus_and_auto_nproc(job_body):
    job = parse_job(job_body(nprocPerNode="auto", gpusPerNode=4, resources={"limits": {"memory": "8Gi"}}))
    assert job.nproc_per_node == 4 and job.backend == "nccl" and job.world_size == 8
    pod = render.render_pod(job, 1)
    res = pod["spec"]["containers"][0]["resources"]
    assert res["limits"] == {"memory": "8Gi", "nvidia.com/gpu": 4}
    assert res["requests"] == {"nvidia.com/gpu": 4}
    assert env_of(pod)["DDPJOB_BACKEND"] == "nccl"
    assert parse_job(job_body(nprocPerNode="auto")).nproc_per_node == 1


def test_checkpoint_volume_is_mounted_everywhere(job_body):
    job = parse_job(job_body(checkpoint={"claimName": "ckpt", "mountPath": "/ckpt"}))
    for pod in render.render(job)[1:]:
        assert env_of(pod)["DDPJOB_CHECKPOINT_DIR"] == "/ckpt"
        assert {"name": "checkpoint", "persistentVolumeClaim": {"claimName": "ckpt"}} in pod["spec"]["volumes"]
        mounts = pod["spec"]["containers"][0]["volumeMounts"]
        assert {"name": "checkpoint", "mountPath": "/ckpt"} in mounts
    job = parse_job(job_body(checkpoint={"volume": {"nfs": {"server": "nfs", "path": "/x"}}}))
    assert {"name": "checkpoint", "nfs": {"server": "nfs", "path": "/x"}} in render.render_pod(job, 0)["spec"][
        "volumes"
    ]


NASTY = [
    "a: b",
    "- item",
    "{x: 1}",
    "[1, 2]",
    "'quoted'",
    '"double"',
    "line1\nline2: x",
    "# comment",
    "*alias",
    "&anchor v",
    "!!python/object:os.system",
    "key: |\n  block",
    "}{",
    "\\",
    "%TAG",
    "--- \n...",
]


@pytest.mark.parametrize("value", NASTY)
def test_env_values_cannot_change_structure(job_body, value):
    job = parse_job(job_body(env=[{"name": "USER_VALUE", "value": value}], args=[value]))
    pod = render.render_pod(job, 0)
    trainer = pod["spec"]["containers"][0]
    assert env_of(pod)["USER_VALUE"] == value
    assert trainer["args"] == [value]
    assert set(pod) == {"apiVersion", "kind", "metadata", "spec"}
    assert set(trainer) == {
        "name",
        "image",
        "command",
        "args",
        "env",
        "ports",
        "resources",
        "volumeMounts",
        "securityContext",
        "terminationMessagePolicy",
    }
    # Through the YAML stream and back: still the same objects.
    assert list(yaml.safe_load_all(render.to_yaml_stream([pod]))) == [pod]


@pytest.mark.parametrize("value", NASTY)
def test_image_and_template_values_are_inserted_as_data(job_body, value):
    job = parse_job(job_body(image=value, template={"metadata": {"annotations": {"note": value}}}))
    pod = render.render_pod(job, 0)
    assert pod["spec"]["containers"][0]["image"] == value
    assert pod["metadata"]["annotations"] == {"note": value}


def test_template_merges_under_what_the_operator_sets(job_body):
    template = {
        "metadata": {"labels": {"team": "vision", names.LABEL_NODE_RANK: "99"}},
        "spec": {
            "restartPolicy": "Always",
            "hostname": "evil",
            "nodeSelector": {"pool": "a100"},
            "schedulerName": "volcano",
            "tolerations": [{"key": "gpu", "operator": "Exists"}],
            "containers": [
                {"name": "sidecar", "image": "busybox"},
                {
                    "name": "trainer",
                    "image": "ignored",
                    "securityContext": {"runAsNonRoot": True},
                    "env": [
                        {"name": "EXTRA", "value": "1"}
                    ],  # a contract name is refused (tests/api/test_template_env.py)
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    "resources": {"limits": {"cpu": "4"}},
                },
            ],
            "volumes": [{"name": "data", "emptyDir": {}}, {"name": "dshm", "emptyDir": {}}],
        },
    }
    job = parse_job(job_body(template=template, gpusPerNode=2, nprocPerNode=2))
    pod = render.render_pod(job, 1)
    spec = pod["spec"]
    assert pod["metadata"]["labels"]["team"] == "vision"
    assert pod["metadata"]["labels"][names.LABEL_NODE_RANK] == "1"
    assert spec["restartPolicy"] == "Never" and spec["hostname"] == "demo-1"
    assert spec["nodeSelector"] == {"pool": "a100"} and spec["schedulerName"] == "volcano"
    assert [c["name"] for c in spec["containers"]] == ["trainer", "sidecar"]
    trainer = spec["containers"][0]
    assert trainer["image"] == "ddpjob/trainer:0.1.0"
    # The restricted defaults stay under what the template sets.
    assert trainer["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
    }
    env = env_of(pod)
    assert env["MASTER_ADDR"] == "demo-0.demo.ml.svc" and env["EXTRA"] == "1"
    assert [e["name"] for e in trainer["env"]].count("MASTER_ADDR") == 1
    assert {"name": "data", "mountPath": "/data"} in trainer["volumeMounts"]
    assert trainer["resources"]["limits"] == {"cpu": "4", "nvidia.com/gpu": 2}
    dshm = [v for v in spec["volumes"] if v["name"] == "dshm"]
    assert dshm == [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    kubernetes_validate.validate(pod, K8S_VERSION, strict=True)


def test_rendering_is_pure(job_body):
    body = job_body()
    job = parse_job(body)
    assert render.render(job) == render.render(job)
    assert body == job_body()


def test_job_read_from_a_file_has_no_owner_reference(job_body):
    body = job_body()
    del body["metadata"]["uid"]
    for obj in render.render(parse_job(body)):
        assert "ownerReferences" not in obj["metadata"]
