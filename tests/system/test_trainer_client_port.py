"""A Kubeflow Trainer `TrainerClient` script ports to `DDPJobClient` with two lines
changed, its import and its job's container, and then runs as written on the real
control plane: train, wait for `Complete` with a callback, the logs of a step, Events,
list, delete."""

from __future__ import annotations

import difflib
import os
import subprocess
import sys

import pytest

from ddpjob_devcluster.clusters.client import wait_until
from ddpjob_devcluster.clusters.real import RealCluster
from tests.support.deadlines import CLUSTER_TEST, PHASE, REACTION

pytestmark = [pytest.mark.slow, pytest.mark.timeout(CLUSTER_TEST)]

# As a Kubeflow Trainer user writes it (the SDK's calls, names and arguments).
TRAINER_CLIENT_SCRIPT = """\
import sys
from kubeflow.trainer import TrainerClient, CustomTrainerContainer, KubernetesBackendConfig

client = TrainerClient(backend_config=KubernetesBackendConfig(namespace=sys.argv[1], config_file=sys.argv[2]))
job_name = client.train(
    trainer=CustomTrainerContainer(image="docker.io/kubeflow/pytorch-mnist:v1", num_nodes=2),
)
statuses = []
job = client.wait_for_job_status(
    job_name,
    status={"Complete"},
    timeout=int(sys.argv[3]),
    polling_interval=1,
    callbacks=[lambda j: statuses.append(j.status)],
)
print("status", job.status, job.num_nodes, statuses[-1])
for line in client.get_job_logs(job_name, step="node-1"):
    print("node-1", line)
for line in client.get_job_logs(name=job_name, follow=True):
    print("node-0", line)
print("events", sorted({e.reason for e in client.get_job_events(job_name)} & {"Created", "Succeeded"}))
print("listed", job_name in [j.name for j in client.list_jobs()])
client.delete_job(job_name)
print("deleted", job_name)
"""

IMPORT = "from kubeflow.trainer import TrainerClient, CustomTrainerContainer, KubernetesBackendConfig"
CONTAINER = '    trainer=CustomTrainerContainer(image="docker.io/kubeflow/pytorch-mnist:v1", num_nodes=2),'
PORTED_IMPORT = (
    "from ddpjob.client import DDPJobClient as TrainerClient, CustomTrainerContainer, KubernetesBackendConfig"
)
PORTED_CONTAINER = (
    '    trainer=CustomTrainerContainer(image="ddpjob/trainer:test", num_nodes=2, command=[sys.executable, "-c", '
    "\"import os; print('hello from node', os.environ['NODE_RANK'], flush=True)\"]),"
)


def ported() -> str:
    assert TRAINER_CLIENT_SCRIPT.count(IMPORT) == 1 and TRAINER_CLIENT_SCRIPT.count(CONTAINER) == 1
    return TRAINER_CLIENT_SCRIPT.replace(IMPORT, PORTED_IMPORT).replace(CONTAINER, PORTED_CONTAINER)


def test_the_port_changes_the_import_line_and_the_container_only() -> None:
    changed = [
        line
        for line in difflib.unified_diff(TRAINER_CLIENT_SCRIPT.splitlines(), ported().splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert changed == [f"-{IMPORT}", f"+{PORTED_IMPORT}", f"-{CONTAINER}", f"+{PORTED_CONTAINER}"]


def test_the_ported_script_runs_as_written(cluster: RealCluster) -> None:
    done = subprocess.run(
        [sys.executable, "-c", ported(), cluster.namespace, str(cluster.kubeconfig), f"{PHASE:.0f}"],
        capture_output=True,
        text=True,
        timeout=PHASE + 2 * REACTION,
        env={**os.environ, "KUBECONFIG": os.devnull},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if not line.startswith("ddpjob-")]  # the wait's progress lines
    assert lines[0] == "status Complete 2 Complete", done.stdout
    assert lines[1:3] == ["node-1 hello from node 1", "node-0 hello from node 0"], done.stdout
    assert lines[3:5] == ["events ['Created', 'Succeeded']", "listed True"], done.stdout
    name = lines[5].removeprefix("deleted ")
    from ddpjob.client import DDPJobClient

    client = DDPJobClient(namespace=cluster.namespace, kubeconfig=str(cluster.kubeconfig))
    wait_until(lambda: name not in {j.name for j in client.list_jobs()}, REACTION, f"{name} was not deleted")
