"""`ddpjob convert`: a Kubeflow PyTorchJob as a DDPJob, every field exact or refused by name."""
from __future__ import annotations

import copy
import pathlib
from typing import Any

import pytest
import yaml

from ddpjob.api.spec import parse_job
from ddpjob.cli.main import main
from ddpjob.cli.pytorchjob import convert

TEMPLATE = {"spec": {"containers": [{
    "name": "pytorch", "image": "example/mnist:1", "command": ["python", "/opt/mnist.py"],
    "args": ["--epochs", "1"], "env": [{"name": "LOG_LEVEL", "value": "info"}],
    "resources": {"limits": {"nvidia.com/gpu": 2, "memory": "8Gi"}},
    "ports": [{"name": "pytorchjob-port", "containerPort": 23456}],
    "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}, {"name": "data", "mountPath": "/data"}]}],
    "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "mnist"}}],
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}}


def pytorchjob(**spec: Any) -> dict[str, Any]:
    replicas = {"Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": copy.deepcopy(TEMPLATE)},
                "Worker": {"replicas": 3, "restartPolicy": "OnFailure", "template": copy.deepcopy(TEMPLATE)}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "mnist", "namespace": "team", "uid": "x", "labels": {"a": "b"}},
            "spec": {"pytorchReplicaSpecs": replicas, "runPolicy": {"backoffLimit": 5, "cleanPodPolicy": "None"},
                     **spec}}


def test_master_and_workers_become_nodes_and_the_pytorch_container_the_spec() -> None:
    job, found = convert(pytorchjob(nprocPerNode="2"))
    assert not found.errors, found.errors
    assert job["metadata"] == {"name": "mnist", "namespace": "team", "labels": {"a": "b"}}
    spec = job["spec"]
    assert (spec["nodes"], spec["nprocPerNode"], spec["gpusPerNode"], spec["maxRestarts"]) == (4, 2, 2, 5)
    assert (spec["image"], spec["command"], spec["args"]) == ("example/mnist:1", ["python", "/opt/mnist.py"],
                                                              ["--epochs", "1"])
    assert spec["resources"] == {"limits": {"memory": "8Gi"}} and spec["port"] == 23456 and spec["shmSize"] == "2Gi"
    assert spec["restartPolicy"] == "OnFailure" and spec["env"] == [{"name": "LOG_LEVEL", "value": "info"}]
    # What stays is the template the operator merges under its own: the trainer container's mounts.
    assert spec["template"]["spec"]["containers"] == [
        {"name": "trainer", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]
    assert [v["name"] for v in spec["template"]["spec"]["volumes"]] == ["data"]
    model = parse_job(job)
    assert (model.world_size, model.backend) == (8, "nccl")


@pytest.mark.parametrize("nproc, gpus, command, expected", [
    ("auto", 2, ["python", "x.py"], "auto"),      # torchrun's auto: the Pod's GPUs, as DDPJob's auto
    ("gpu", 2, ["torchrun", "x.py"], "auto"),
    (None, 0, ["python", "x.py"], 1),           # the default auto on CPU, a plain program: one process per Pod
    ("4", 0, ["torchrun", "x.py"], 4),
])
def test_nproc_per_node_maps_only_where_it_means_the_same(nproc, gpus, command, expected) -> None:
    body = pytorchjob(**({"nprocPerNode": nproc} if nproc else {}))
    for replica in body["spec"]["pytorchReplicaSpecs"].values():
        container = replica["template"]["spec"]["containers"][0]
        container["command"] = command
        container["resources"] = {"limits": {"nvidia.com/gpu": gpus}} if gpus else {}
    job, found = convert(body)
    assert not found.errors and job["spec"]["nprocPerNode"] == expected, found.errors


def test_what_has_no_exact_equivalent_is_refused_naming_the_field() -> None:
    body = pytorchjob(elasticPolicy={"rdzvBackend": "etcd", "metrics": [{"type": "Resource"}]})
    body["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["image"] = "other:2"
    body["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = "Always"
    body["spec"]["runPolicy"]["schedulingPolicy"] = {"queue": "research"}
    for replica in body["spec"]["pytorchReplicaSpecs"].values():
        replica["template"]["spec"]["containers"][0]["command"] = ["torchrun", "x.py"]
        replica["template"]["spec"]["containers"][0]["resources"] = {}
    _, found = convert(body)
    paths = {e.path for e in found.errors}
    assert paths == {"spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].image",
                     "spec.pytorchReplicaSpecs.Worker.restartPolicy", "spec.elasticPolicy",
                     "spec.elasticPolicy.rdzvBackend", "spec.elasticPolicy.metrics", "spec.nprocPerNode",
                     "spec.runPolicy.schedulingPolicy.queue"}, found.errors
    _, found = convert({"apiVersion": "v1", "kind": "PersistentVolumeClaim"})
    assert [str(e) for e in found.errors] == ["(root): not a kubeflow.org/v1 PyTorchJob (got v1 PersistentVolumeClaim)"]


def test_an_elastic_pytorchjob_becomes_an_elastic_ddpjob() -> None:
    body = pytorchjob(elasticPolicy={"minReplicas": 2, "maxReplicas": 4, "rdzvBackend": "c10d", "maxRestarts": 100},
                      nprocPerNode="1")
    del body["spec"]["pytorchReplicaSpecs"]["Master"]
    body["spec"]["runPolicy"]["schedulingPolicy"] = {"queue": "research", "minAvailable": 2}
    job, found = convert(body, gang="volcano")
    assert not found.errors, found.errors
    spec = job["spec"]
    assert (spec["nodes"], spec["elastic"]) == (3, {"minNodes": 2, "maxNodes": 4})
    assert spec["scheduling"] == {"gang": "volcano", "queue": "research", "minAvailable": 2}
    assert any("maxRestarts" in note for note in found.notes)
    assert parse_job(job).elastic is not None


def test_the_command_prints_the_ddpjob_and_names_what_it_refuses(tmp_path: pathlib.Path, capsys) -> None:
    path = tmp_path / "pytorchjob.yaml"
    path.write_text(yaml.safe_dump(pytorchjob(nprocPerNode="2")))
    assert main(["convert", str(path)]) == 0
    out, err = capsys.readouterr()
    job = yaml.safe_load(out)
    assert job["kind"] == "DDPJob" and job["spec"]["nodes"] == 4 and "note: dropped" in err
    bad = pytorchjob(nprocPerNode="cpu")
    path.write_text(yaml.safe_dump(bad))
    assert main(["convert", "-f", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"{path}: spec.nprocPerNode: 'cpu': torchrun starts one process per CPU core"), err
