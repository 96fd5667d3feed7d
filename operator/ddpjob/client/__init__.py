"""The Python API of ddpjob, for notebooks and pipelines: create a DDPJob from a dict, a
file, a few arguments or a container, follow it, read its logs, status and Events,
delete it; on a cluster, or on this machine with `ddpjob run`'s runner.

    from ddpjob.client import DDPJobClient

    client = DDPJobClient()                       # your kubeconfig, as kubectl reads it
    name = client.train("manifests/examples/mnist-cpu.yaml")
    job = client.wait_for_job_status(name)        # prints each change; JobFailed, TimeoutError
    for line in client.get_job_logs(name):
        print(line)
    client.delete_job(name)

Kubeflow Trainer's `TrainerClient` scripts port with their import line
(`from ddpjob.client import DDPJobClient as TrainerClient, CustomTrainerContainer`) and
their container. docs/python-api.md is the guide; it needs the `cli` extra (the
kubernetes client).
"""

from ddpjob.api.job_file import FileError
from ddpjob.api.spec import InvalidSpec
from ddpjob.client.backend_configs import CustomTrainerContainer, KubernetesBackendConfig, LocalProcessBackendConfig
from ddpjob.client.client import DDPJobClient, JobFailed
from ddpjob.client.events import Event
from ddpjob.client.job_status import Failure, Job, Progress
from ddpjob.cluster.connection import ClusterError

__all__ = [
    "ClusterError",
    "CustomTrainerContainer",
    "DDPJobClient",
    "Event",
    "Failure",
    "FileError",
    "InvalidSpec",
    "Job",
    "JobFailed",
    "KubernetesBackendConfig",
    "LocalProcessBackendConfig",
    "Progress",
]
