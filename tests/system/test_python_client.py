"""The Python API (`ddpjob.client.DDPJobClient`) against the real control plane, as a
notebook uses it: a job from a few arguments, a dict and a file; waiting with progress;
status and the progress record; logs of one Pod, of a rank, of every Pod; Events; list;
a failure raised with its reason; delete."""

from __future__ import annotations

import pathlib
import sys
from typing import Any

import pytest
import yaml

from ddpjob.client import ClusterError, DDPJobClient, Event, InvalidSpec, Job, JobFailed
from ddpjob_devcluster.clusters.client import wait_until
from ddpjob_devcluster.clusters.real import RealCluster
from tests.support.deadlines import CLUSTER_TEST, PHASE, REACTION

pytestmark = [pytest.mark.slow, pytest.mark.timeout(CLUSTER_TEST)]

# Each node says hello; node 0 leaves its last progress record as its termination message
# (what ddpjob-launch does), which the operator shows in status.progress; node 1 exits
# with EXIT_CODE.
SCRIPT = """
import json, os, sys
rank = int(os.environ['NODE_RANK'])
print(f'hello from node {rank} of {os.environ["NNODES"]}', flush=True)
if rank == 0:
    record = {'step': 10, 'total_steps': 10, 'epoch': 1, 'total_epochs': 1, 'loss': 0.25}
    with open(os.environ.get('DDPJOB_TERMINATION_LOG', '/dev/termination-log'), 'w') as f:
        f.write(json.dumps(record))
sys.exit(int(os.environ.get('EXIT_CODE', '0')) if rank == 1 else 0)
"""


def job_dict(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "nodes": 2,
            "nprocPerNode": 1,
            "image": "ddpjob/trainer:test",
            "command": [sys.executable, "-c", SCRIPT],
            "restartBackoffSeconds": 0,
        },
    }


@pytest.fixture
def client(cluster: RealCluster) -> DDPJobClient:
    return DDPJobClient(namespace=cluster.namespace, kubeconfig=str(cluster.kubeconfig))


def test_train_wait_logs_status_list_and_delete(
    client: DDPJobClient, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A few arguments: the name is drawn, the job checked and created.
    name = client.train(
        image="ddpjob/trainer:test",
        command=[sys.executable, "-c", SCRIPT],
        nodes=2,
        nproc_per_node=1,
        restart_backoff_seconds=0,
    )
    assert name.startswith("ddpjob-")
    seen: list[Job] = []
    job = client.wait_for_job_status(name, timeout=PHASE, polling_interval=0.5, callbacks=[seen.append])
    assert job.phase == "Succeeded" and job.finished and job.restarts == 0 and job.nodes == 2
    assert job.world_size == 2 and job.nproc_per_node == 1
    assert seen[-1] == job and [j.phase for j in seen][-1] == "Succeeded"
    printed = capsys.readouterr().out.splitlines()
    assert printed and printed[-1].startswith(f"{name}: Succeeded"), printed  # the progress lines
    # Status and the progress record, typed.
    assert job.progress is not None and job.progress.step == 10 and job.progress.total_steps == 10
    assert job.progress.loss == 0.25 and job.progress.final
    assert client.get_job(name).phase == "Succeeded"
    # As a TrainerClient script waits: its status name, a callback on the poll.
    polled: list[Job] = []
    assert (
        client.wait_for_job_status(
            name, status={"Complete"}, timeout=PHASE, polling_interval=0.5, callbacks=[polled.append], progress=False
        ).status
        == "Complete"
    )
    assert [j.phase for j in polled] == ["Succeeded"]

    # Logs: node 0 by default, a rank's Pod, every Pod prefixed.
    assert list(client.get_job_logs(name)) == ["hello from node 0 of 2"]
    assert list(client.get_job_logs(name, rank=1)) == ["hello from node 1 of 2"]
    assert list(client.get_job_logs(name, step="node-1", follow=True)) == ["hello from node 1 of 2"]
    assert sorted(client.get_job_logs(name, all_nodes=True, follow=True)) == [
        f"[{name}-0] hello from node 0 of 2",
        f"[{name}-1] hello from node 1 of 2",
    ]
    events = client.get_job_events(name)  # typed (no managedFields), oldest first; its Service's too
    assert all(isinstance(e, Event) and e.involved_object_name == name and e.event_time is not None for e in events), (
        events
    )
    assert [e.event_time for e in events] == sorted(e.event_time for e in events if e.event_time)
    reasons = [e.reason for e in events if e.involved_object_kind == "DDPJob"]
    assert "Created" in reasons and "Succeeded" in reasons, reasons
    assert reasons.index("Created") < reasons.index("Succeeded")

    # A dict and a file, each named; both listed.
    assert client.train(job_dict("from-dict", sweep="lr-0.1")) == "from-dict"
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job_dict("ignored")))
    assert client.train(path, name="from-file") == "from-file"
    assert {"from-dict", "from-file", name} <= {j.name for j in client.list_jobs()}
    assert [j.name for j in client.list_jobs(labels={"sweep": "lr-0.1"})] == ["from-dict"]  # a label selector
    assert name in {j.name for j in client.list_jobs(status={"Complete"})}
    assert name not in {j.name for j in client.list_jobs(status={"Running", "Created"})}
    # The same name again: the API server's refusal, in one line.
    with pytest.raises(ClusterError, match=r"ddpjob from-dict already exists in namespace .*: delete_job"):
        client.train(job_dict("from-dict"))
    # A job read back is a job to create again: what the server set is left out.
    again = client.train(client.get_job(name).raw, name=f"{name}-again")
    assert client.get_job(again).restarts == 0

    client.delete_job(name)
    wait_until(lambda: name not in {j.name for j in client.list_jobs()}, REACTION, f"{name} was not deleted")
    with pytest.raises(RuntimeError, match=f"not found: ddpjob {name}") as gone:  # TrainerClient's kind of error
        client.get_job(name)
    assert isinstance(gone.value, ClusterError) and gone.value.status == 404


def test_a_failure_is_raised_with_its_reason_and_a_bad_job_is_refused_before_sending(client: DDPJobClient) -> None:
    body = job_dict("broken")
    body["spec"].update(restartPolicy="ExitCode", env=[{"name": "EXIT_CODE", "value": "3"}])
    client.train(body)
    with pytest.raises(JobFailed) as failed:
        client.wait_for_job_status("broken", timeout=PHASE, polling_interval=0.5, progress=False)
    job = failed.value.job
    assert job.phase == "Failed" and job.last_failure is not None
    assert job.last_failure.pod == "broken-1" and job.last_failure.exit_code == 3
    assert str(failed.value).startswith("broken: Failed")

    before = {j.name for j in client.list_jobs()}
    with pytest.raises(InvalidSpec, match=r"spec.restartPolcy: unknown field; did you mean restartPolicy"):
        client.train(image="x", restart_polcy="Never")
    assert {j.name for j in client.list_jobs()} == before  # nothing was sent

    # A GPU job on a cluster of CPU Nodes waits Pending for ever: the wait times out.
    client.train(image="x", command=["true"], gpus_per_node=1, name="no-gpu")
    with pytest.raises(TimeoutError, match="no-gpu: not Succeeded after 2s"):
        client.wait_for_job_status("no-gpu", timeout=2, polling_interval=0.5, progress=False)
