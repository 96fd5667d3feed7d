"""The Python client's local backend (`LocalProcessBackendConfig`): the same calls as on a
cluster, each job run by `ddpjob run`'s own runner in a process of its own
(local/background.py), as Kubeflow Trainer's `LocalProcessBackend` runs a TrainJob."""

from __future__ import annotations

import os
import pathlib
import sys
import time

import pytest

from ddpjob.client import ClusterError, CustomTrainerContainer, DDPJobClient, JobFailed, LocalProcessBackendConfig
from tests.support.deadlines import PHASE, REACTION, TEST

pytestmark = pytest.mark.timeout(TEST)

# Each node says hello, node 1 says it twice; EXIT_CODE ends node 1 (DDPJOB_ names are
# harmless to `ddpjob run`, which refuses unvetted env names).
SCRIPT = """
import os, sys
rank = int(os.environ['NODE_RANK'])
print(f'hello from node {rank} of {os.environ["NNODES"]}', flush=True)
if rank == 1:
    print('again from node 1', flush=True)
sys.exit(int(os.environ.get('DDPJOB_EXIT_CODE', '0')) if rank == 1 else 0)
"""


@pytest.fixture
def client(tmp_path: pathlib.Path) -> DDPJobClient:
    return DDPJobClient(backend_config=LocalProcessBackendConfig(workdir=str(tmp_path / "runs")))


def test_a_container_job_runs_here_with_the_runner_and_says_what_a_cluster_says(
    client: DDPJobClient, tmp_path: pathlib.Path
) -> None:
    name = client.train(
        trainer=CustomTrainerContainer(
            image="ddpjob/trainer:test", num_nodes=2, command=[sys.executable, "-c", SCRIPT]
        ),
        name="here",
    )
    polls: list[str] = []
    job = client.wait_for_job_status(
        name,
        status={"Complete"},
        timeout=PHASE,
        polling_interval=0.2,
        callbacks=[lambda j: polls.append(j.phase)],
        progress=False,
    )
    assert job.phase == "Succeeded" and job.status == "Complete" and job.world_size == 2 and job.restarts == 0
    assert polls[-1] == "Succeeded" and set(polls) <= {"Pending", "Running", "Succeeded"}
    assert job.completion_time is not None  # the runner's own final status, read back
    assert (tmp_path / "runs" / "here" / "status.yaml").exists()  # where `ddpjob run --workdir` keeps it

    assert list(client.get_job_logs(name)) == ["hello from node 0 of 2"]
    assert list(client.get_job_logs(name, step="node-1")) == ["hello from node 1 of 2", "again from node 1"]
    assert list(client.get_job_logs(name, step="node-1", tail=1)) == ["again from node 1"]
    assert sorted(client.get_job_logs(name, all_nodes=True, follow=True)) == [
        "[here-0] hello from node 0 of 2",
        "[here-1] again from node 1",
        "[here-1] hello from node 1 of 2",
    ]
    with pytest.raises(ClusterError, match=r"^not found: no Pod of node 2 for ddpjob here"):
        client.get_job_logs(name, step="node-2")
    # Each phase the runner entered, in order; a job this short may end between two of its
    # looks, so Running is there only when it saw it.
    reasons = [e.reason for e in client.get_job_events(name)]
    assert reasons in (["Pending", "Running", "Succeeded"], ["Pending", "Succeeded"]), reasons
    assert [j.name for j in client.list_jobs(status={"Complete"})] == ["here"]
    with pytest.raises(ClusterError, match="already exists here"):
        client.train(trainer=CustomTrainerContainer(image="i", command=["true"]), name="here")
    with pytest.raises(ClusterError, match="suspend_job: a job run on this machine is not suspended"):
        client.suspend_job(name)
    client.delete_job(name)
    assert client.list_jobs() == []
    with pytest.raises(ClusterError, match=r"^not found: ddpjob here"):
        client.get_job(name)


def test_a_failure_is_raised_with_the_runners_reason(client: DDPJobClient) -> None:
    client.train(
        image="i",
        command=[sys.executable, "-c", SCRIPT],
        nodes=2,
        name="broken",
        env={"DDPJOB_EXIT_CODE": "3"},
        restart_policy="Never",
    )
    with pytest.raises(JobFailed) as failed:
        client.wait_for_job_status("broken", timeout=PHASE, polling_interval=0.2, progress=False)
    job = failed.value.job
    assert job.phase == "Failed" and job.last_failure is not None
    assert job.last_failure.pod == "broken-1" and job.last_failure.exit_code == 3
    assert str(failed.value).startswith("broken: Failed")
    client.delete_job("broken")


def test_what_ddpjob_run_refuses_is_the_jobs_failure(client: DDPJobClient) -> None:
    client.train(image="i", command=[sys.executable, "-c", "pass"], name="env", env={"LD_PRELOAD": "/x.so"})
    with pytest.raises(JobFailed, match=r"env: Failed: .*LD_PRELOAD"):
        client.wait_for_job_status("env", timeout=PHASE, polling_interval=0.2, progress=False)
    client.delete_job("env")


def test_a_pod_cannot_say_the_runners_lines_and_delete_stops_the_run(
    client: DDPJobClient, tmp_path: pathlib.Path
) -> None:
    pidfile = tmp_path / "pid"
    hostile = (
        f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); "
        "print('[ddpjob] phase Succeeded: said by the Pod', flush=True); "
        "print('[ddpjob] error: also the Pod', flush=True); time.sleep(600)"
    )
    client.train(image="i", command=[sys.executable, "-c", hostile], name="liar")
    client.wait_for_job_status("liar", status={"Running"}, timeout=PHASE, polling_interval=0.2, progress=False)
    deadline = time.monotonic() + REACTION
    while not pidfile.exists():
        assert time.monotonic() < deadline, "the Pod's process did not start"
        time.sleep(0.1)
    while "[ddpjob] error: also the Pod" not in list(client.get_job_logs("liar")):
        assert time.monotonic() < deadline, "the Pod's lines were not written"
        time.sleep(0.1)
    assert client.get_job("liar").phase == "Running"  # its lines are its log, not the runner's word
    pid = int(pidfile.read_text())
    client.delete_job("liar")
    while True:  # the runner stops its Pods in order before it ends
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline + REACTION, f"the Pod's process {pid} outlived delete_job"
        time.sleep(0.1)
