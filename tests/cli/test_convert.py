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

TEMPLATE = {
    "spec": {
        "containers": [
            {
                "name": "pytorch",
                "image": "example/mnist:1",
                "command": ["python", "/opt/mnist.py"],
                "args": ["--epochs", "1"],
                "env": [{"name": "LOG_LEVEL", "value": "info"}],
                "resources": {"limits": {"nvidia.com/gpu": 2, "memory": "8Gi"}},
                "ports": [{"name": "pytorchjob-port", "containerPort": 23456}],
                "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}, {"name": "data", "mountPath": "/data"}],
            }
        ],
        "volumes": [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "mnist"}},
        ],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
    }
}


def pytorchjob(**spec: Any) -> dict[str, Any]:
    replicas = {
        "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": copy.deepcopy(TEMPLATE)},
        "Worker": {"replicas": 3, "restartPolicy": "OnFailure", "template": copy.deepcopy(TEMPLATE)},
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "mnist", "namespace": "team", "uid": "x", "labels": {"a": "b"}},
        "spec": {"pytorchReplicaSpecs": replicas, "runPolicy": {"backoffLimit": 5, "cleanPodPolicy": "None"}, **spec},
    }


def test_master_and_workers_become_nodes_and_the_pytorch_container_the_spec() -> None:
    job, found = convert(pytorchjob(nprocPerNode="2"))
    assert not found.errors, found.errors
    # The namespace is where the DDPJob is submitted (Kubeflow's examples name `kubeflow`): said.
    assert job["metadata"] == {"name": "mnist", "labels": {"a": "b"}}
    assert (
        "dropped metadata.namespace 'team': the DDPJob goes to the namespace it is submitted to "
        "(`ddpjob submit -n team` keeps it)" in found.notes
    )
    spec = job["spec"]
    assert (spec["nodes"], spec["nprocPerNode"], spec["gpusPerNode"], spec["maxRestarts"]) == (4, 2, 2, 5)
    assert (spec["image"], spec["command"], spec["args"]) == (
        "example/mnist:1",
        ["python", "/opt/mnist.py"],
        ["--epochs", "1"],
    )
    assert spec["resources"] == {"limits": {"memory": "8Gi"}} and spec["port"] == 23456 and spec["shmSize"] == "2Gi"
    assert spec["restartPolicy"] == "OnFailure" and spec["env"] == [{"name": "LOG_LEVEL", "value": "info"}]
    # What stays is the template the operator merges under its own: the trainer container's mounts.
    assert spec["template"]["spec"]["containers"] == [
        {"name": "trainer", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}
    ]
    assert [v["name"] for v in spec["template"]["spec"]["volumes"]] == ["data"]
    model = parse_job(job)
    assert (model.world_size, model.backend) == (8, "nccl")


@pytest.mark.parametrize(
    "nproc, gpus, command, expected",
    [
        ("auto", 2, ["python", "x.py"], "auto"),  # torchrun's auto: the Pod's GPUs, as DDPJob's auto
        ("gpu", 2, ["torchrun", "x.py"], "auto"),
        (None, 0, ["python", "x.py"], 1),  # the default auto on CPU, a plain program: one process per Pod
        ("4", 0, ["torchrun", "x.py"], 4),
    ],
)
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
    assert paths == {
        "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].image",
        "spec.pytorchReplicaSpecs.Worker.restartPolicy",
        "spec.elasticPolicy",
        "spec.elasticPolicy.rdzvBackend",
        "spec.runPolicy.schedulingPolicy.queue",
    }, found.errors
    _, found = convert({"apiVersion": "v1", "kind": "PersistentVolumeClaim"})
    assert [str(e) for e in found.errors] == ["(root): not a kubeflow.org/v1 PyTorchJob (got v1 PersistentVolumeClaim)"]


def test_an_elastic_pytorchjob_becomes_an_elastic_ddpjob() -> None:
    body = pytorchjob(
        elasticPolicy={"minReplicas": 2, "maxReplicas": 4, "rdzvBackend": "c10d", "maxRestarts": 100}, nprocPerNode="1"
    )
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
    assert out == "" and err.startswith(
        f"{path}: spec.nprocPerNode: 'cpu': torchrun starts one process per CPU core"
    ), err


# Kubeflow's own elastic examples (kubeflow/training-operator examples/pytorch/elastic/),
# as they are: neither sets nprocPerNode, echo's command names c10d, imagenet has an autoscaler.
ECHO = """
apiVersion: "kubeflow.org/v1"
kind: PyTorchJob
metadata:
  name: elastic-example-echo
  namespace: kubeflow
spec:
  elasticPolicy: {rdzvBackend: c10d, minReplicas: 1, maxReplicas: 2, maxRestarts: 100}
  pytorchReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers:
            - name: pytorch
              image: kubeflow/pytorch-elastic-example-echo:1.0.0
              imagePullPolicy: IfNotPresent
              env: [{name: LOGLEVEL, value: DEBUG}]
              command: [python, -m, torch.distributed.run, --rdzv_backend=c10d, ./echo.py]
"""
IMAGENET = """
apiVersion: "kubeflow.org/v1"
kind: PyTorchJob
metadata:
  name: elastic-example-imagenet
spec:
  elasticPolicy:
    rdzvBackend: c10d
    minReplicas: 1
    maxReplicas: 3
    maxRestarts: 100
    metrics:
      - type: Resource
        resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}
  pytorchReplicaSpecs:
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: pytorch
              image: quay.io/johnugeorge/pytorch-elastic-example-imagenet:0.1
              resources: {requests: {cpu: 4}}
              command: [python, -m, torch.distributed.run, /workspace/examples/imagenet.py, "--arch=resnet18",
                        "--epochs=1", "--batch-size=32", "--workers=0", /workspace/data/tiny-imagenet-200]
"""


def test_kubeflows_elastic_examples_convert_saying_what_differs(tmp_path: pathlib.Path, capsys) -> None:
    said = {}
    for name, text in (("echo", ECHO), ("imagenet", IMAGENET)):
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        assert main(["convert", str(path)]) == 0, capsys.readouterr().err
        out, err = said[name] = capsys.readouterr()
        job = yaml.safe_load(out)
        spec = job["spec"]
        assert (spec["nprocPerNode"], spec["elastic"]["minNodes"]) == (1, 1) and "namespace" not in job["metadata"]
        assert spec["command"][:3] == ["python", "-m", "torch.distributed.run"]
        assert "--rdzv_backend=c10d" not in spec["command"]  # the job sets its own rendezvous
        # Unset, PyTorchJob's default is auto: a process per CPU core of the node, said.
        assert (
            f"{path}: note: spec.nprocPerNode: unset, so auto (the PyTorchJob default) starts a torchrun "
            "process per CPU core of the node a Pod lands on" in err
        ), err
        parse_job(job)
    assert (
        f"{tmp_path}/echo.yaml: note: dropped spec.pytorchReplicaSpecs.Worker.template.spec.containers[0]."
        "command[3] --rdzv_backend=c10d: a DDPJob sets torchrun's rendezvous itself" in said["echo"][1]
    )
    assert f"{tmp_path}/echo.yaml: note: dropped metadata.namespace 'kubeflow'" in said["echo"][1]
    assert "note: dropped spec.elasticPolicy.metrics: the training operator's autoscaler" in said["imagenet"][1]


def test_torchruns_flags_in_the_command_that_a_ddpjob_sets_are_taken_out_and_said() -> None:
    body = pytorchjob()
    del body["spec"]["pytorchReplicaSpecs"]["Master"]
    container = body["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    container.update(
        command=["torchrun", "--nnodes", "4", "--nproc-per-node=2", "--rdzv_backend", "static", "--master_port=29400"],
        args=["/opt/train.py", "--nnodes", "9"],
        resources={},
    )
    job, found = convert(body)
    assert not found.errors, found.errors
    # The script's own --nnodes stays: only torchrun's flags, before the script, are its.
    assert (job["spec"]["command"], job["spec"]["args"]) == (["torchrun"], ["/opt/train.py", "--nnodes", "9"])
    assert job["spec"]["nprocPerNode"] == 2
    where = "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0]"
    assert [n for n in found.notes if "command" in n] == [
        f"dropped {where}.command[1] --nnodes 4: a DDPJob sets spec.nodes (PET_NNODES) itself",
        f"dropped {where}.command[3] --nproc-per-node=2: it is spec.nprocPerNode ('2')",
        f"dropped {where}.command[4] --rdzv_backend static: a DDPJob sets torchrun's rendezvous itself",
        f"dropped {where}.command[6] --master_port=29400: a DDPJob sets spec.port (PET_MASTER_PORT) itself",
    ]
    container["command"] = ["torchrun", "--rdzv-backend=etcd", "--standalone", "x.py"]
    _, found = convert(body)
    assert [str(e) for e in found.errors] == [
        f"{where}.command[1]: 'etcd': a DDPJob's rendezvous is static on node 0 (PET_RDZV_BACKEND)",
        f"{where}.command[2]: --standalone has no DDPJob equivalent: a DDPJob's rendezvous spans its Pods",
    ]


@pytest.mark.parametrize(
    "change, line",
    [
        (
            lambda b: b["spec"]["pytorchReplicaSpecs"]["Worker"].update(replicas="abc"),
            "spec.pytorchReplicaSpecs.Worker.replicas: must be a whole number from 0 to 1024 (got 'abc')",
        ),
        (
            lambda b: b["spec"].update(nprocPerNode="²"),  # str.isdigit() says yes; int() says no
            "spec.nprocPerNode: must be a number, auto, gpu or cpu (got '²')",
        ),
        (
            lambda b: b["spec"].update(runPolicy=[{"backoffLimit": 3}]),
            "spec.runPolicy: must be an object (got [{'backoffLimit': 3}])",
        ),
        (
            "replicas: 2",
            "spec.pytorchReplicaSpecs.Worker.replicas: must be a whole number from 0 to 1024 (got "
            "999999999999999999999999999999999999999999999999999999999999... (4300 characters))",
        ),
        (
            lambda b: b["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0].update(
                resources={"limits": {"nvidia.com/gpu": "1Gi"}}
            ),
            "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources.limits.nvidia.com/gpu: must be a "
            "whole number from 0 to 1024 (got '1Gi')",
        ),
        (
            lambda b: b["spec"].update(pytorchReplicaSpecs=["Worker"]),
            "spec.pytorchReplicaSpecs: must be an object (got ['Worker'])",
        ),
        (
            lambda b: b["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"].update(containers="pytorch"),
            "spec.pytorchReplicaSpecs.Worker.template.spec.containers: must be a list of objects (got 'pytorch')",
        ),
        (
            lambda b: b["spec"]["elasticPolicy"].update(minReplicas="one"),
            "spec.elasticPolicy.minReplicas: must be a whole number from 1 to 1024 (got 'one')",
        ),
        (lambda b: b.update(spec=["x"]), "spec: must be an object (got ['x'])"),
    ],
)
def test_a_malformed_pytorchjob_is_one_line_naming_its_field(tmp_path: pathlib.Path, capsys, change, line) -> None:
    path = tmp_path / "bad.yaml"
    if isinstance(change, str):  # a 4,300-digit count, as YAML holds it
        path.write_text(ECHO.replace(change, change.split(":")[0] + ": " + "9" * 4300))
    else:
        body = yaml.safe_load(ECHO)
        change(body)
        path.write_text(yaml.safe_dump(body))
    assert main(["convert", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [f"{path}: {line}"], err
