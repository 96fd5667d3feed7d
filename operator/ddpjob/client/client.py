"""`DDPJobClient`: DDPJobs from Python (a notebook, a pipeline step), on a cluster or on
this machine.

Kubeflow Trainer's `TrainerClient` ports to it with its import line and its job's
container changed: the same names and arguments where they mean the same (train with
`trainer=CustomTrainerContainer(...)`, get_job, list_jobs, `get_job_logs(name, step=,
follow=)`, `wait_for_job_status(name, status={"Complete"}, timeout, polling_interval,
callbacks)`, get_job_events, delete_job, `backend_config=`), its status names beside
DDPJob's phases (status_names.py), and its errors' kinds: RuntimeError (`ClusterError`,
`JobFailed`), TimeoutError, ValueError (`InvalidSpec`, an unknown status or step).

On a cluster it stands on the cluster layer the `ddpjob` command stands on
(kubernetes_backend.py over ddpjob/cluster/); on this machine each job is run by `ddpjob
run`'s runner (local_backend.py). Either way a job is checked as `ddpjob submit` checks
a file before anything starts (job_body.py).
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ddpjob.client import job_body, status_names
from ddpjob.client.backend import Backend
from ddpjob.client.backend_configs import (
    CustomTrainerContainer,
    KubernetesBackendConfig,
    LocalProcessBackendConfig,
)
from ddpjob.client.events import Event, oldest_first
from ddpjob.client.job_status import Job
from ddpjob.client.kubernetes_backend import KubernetesBackend

# TrainerClient's step of a node: `node-0` is node 0's Pod (global rank 0's).
NODE_STEP = re.compile(r"node-(\d{1,5})")
MAX_TIMEOUT = 7 * 24 * 3600.0  # a week, as `ddpjob wait --timeout`: every wait has a bound


class JobFailed(RuntimeError):
    """A wait ended in a phase not waited for (`Failed`, or `Succeeded` when waiting for
    `Running`); `job` is the job as it ended."""

    def __init__(self, job: Job):
        super().__init__(job.describe())
        self.job = job


class DDPJobClient:
    """DDPJobs in one namespace of the cluster of a kubeconfig, as `ddpjob` reaches it:
    `kubeconfig` (default `$KUBECONFIG`, then ~/.kube/config), `context`, `namespace`
    (default: the context's, else `default`); inside a Pod, its service account. Or, as
    TrainerClient takes it, `backend_config=KubernetesBackendConfig(...)` (the same) or
    `LocalProcessBackendConfig()` (this machine, with `ddpjob run`'s runner)."""

    def __init__(
        self,
        namespace: str | None = None,
        kubeconfig: str | None = None,
        context: str | None = None,
        *,
        backend_config: KubernetesBackendConfig | LocalProcessBackendConfig | None = None,
    ):
        if backend_config is not None and (namespace or kubeconfig or context):
            raise TypeError("DDPJobClient(): give namespace/kubeconfig/context or backend_config=, not both")
        if backend_config is None or isinstance(backend_config, KubernetesBackendConfig):
            self._backend: Backend = KubernetesBackend(
                backend_config or KubernetesBackendConfig(namespace, config_file=kubeconfig, context=context)
            )
        elif isinstance(backend_config, LocalProcessBackendConfig):
            from ddpjob.client.local_backend import LocalProcessBackend

            self._backend = LocalProcessBackend(backend_config)
        else:
            raise ValueError(f"backend_config: not a backend configuration: {backend_config!r}")

    @property
    def namespace(self) -> str:
        return self._backend.namespace

    # ---- create --------------------------------------------------------------------

    def train(
        self,
        job: job_body.JobSource | None = None,
        *,
        name: str | None = None,
        image: str | None = None,
        command: Sequence[str] | None = None,
        args: Sequence[str] = (),
        nodes: int = 1,
        nproc_per_node: int | str = "auto",
        gpus_per_node: int = 0,
        env: Mapping[str, str] | None = None,
        template_allow: str | None = None,
        trainer: CustomTrainerContainer | None = None,
        runtime: object = None,
        initializer: object = None,
        options: object = None,
        **spec: Any,
    ) -> str:
        """Create a DDPJob and return its name.

        `job` is a DDPJob as a dict or the path of its YAML file; or `trainer=` a
        `CustomTrainerContainer` (TrainerClient's); or give `image` and the rest
        (`command`, `args`, `nodes`, `nproc_per_node`, `gpus_per_node`, `env`, and any
        other spec field as a keyword: `restart_policy="ExitCode"`, `checkpoint={...}`).
        `name` overrides the job's; without either, one is drawn. The job is checked
        first (InvalidSpec names each bad field; `template_allow` as `ddpjob submit
        --template-allow`). A job of that name already there is an error: delete it
        first (a finished job never runs again under its name). TrainerClient's
        `runtime`, `initializer` and `options` have nothing to mean here: only None."""
        for argument, value in (("runtime", runtime), ("initializer", initializer), ("options", options)):
            if value is not None:
                raise ValueError(f"{argument}: a DDPJob has no {argument}; give the job's container (trainer=)")
        body, said = job_body.from_call(
            job, trainer, image, command, args, nodes, nproc_per_node, gpus_per_node, env, spec
        )
        body, model = job_body.checked(body, name, self.namespace, template_allow, said)
        self._backend.create(body)
        return model.name

    # ---- read ----------------------------------------------------------------------

    def get_job(self, name: str) -> Job:
        """The job as it is now (ClusterError `not found: ...` if there is none)."""
        return self._backend.get(name)

    def list_jobs(
        self, runtime: object = None, *, status: Iterable[str] | None = None, labels: Mapping[str, str] | None = None
    ) -> list[Job]:
        """The namespace's DDPJobs, by name; `status`: only those in these phases (or
        TrainerClient's names); `labels`: only those with these labels (on a cluster, a
        label selector)."""
        if runtime is not None:
            raise ValueError("runtime: a DDPJob has no runtime; filter with status= or labels=")
        wanted = status_names.phases(status, "list_jobs(status=)") if status is not None else None
        return sorted(
            (j for j in self._backend.find(labels) if wanted is None or j.phase in wanted), key=lambda j: j.name
        )

    def get_job_events(self, name: str) -> list[Event]:
        """The job's own Events (Created, Running, Restarting, NodeLost, Failed, ...), oldest first."""
        return oldest_first(self._backend.events(name))

    def wait_for_job_status(
        self,
        name: str,
        status: Iterable[str] | str = ("Succeeded",),
        timeout: float = 600.0,
        polling_interval: float = 2.0,
        callbacks: Iterable[Callable[[Job], None]] | None = None,
        progress: bool = True,
    ) -> Job:
        """Poll the job until its phase is one of `status` (a phase, or TrainerClient's
        `Complete`/`Created`; any other name is a ValueError), and return it. Every poll
        passes the job to each callback; each change of phase, restarts or progress is
        printed as one line (`progress=False`: quiet). A job that ends in a phase not
        waited for raises JobFailed; `timeout` seconds without raises TimeoutError."""
        given = [status] if isinstance(status, str) else list(status)
        wanted = status_names.phases(given, "wait_for_job_status(status=)")
        if not 0 <= timeout <= MAX_TIMEOUT:
            raise ValueError(f"timeout: must be 0 to {MAX_TIMEOUT:.0f} seconds (got {timeout})")
        if not polling_interval > 0:
            raise ValueError(f"polling_interval: must be more than 0 seconds (got {polling_interval})")
        deadline = time.monotonic() + timeout
        last: str | None = None
        while True:
            job = self.get_job(name)
            if (now := job.describe()) != last and progress:
                print(now, file=sys.stdout, flush=True)
            last = now
            for callback in callbacks or ():
                callback(job)
            if job.phase in wanted:
                return job
            if job.finished:
                raise JobFailed(job)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{name}: not {' or '.join(sorted(given))} after {timeout:g}s (phase {job.phase})")
            time.sleep(min(polling_interval, left))

    def get_job_logs(
        self,
        name: str,
        step: str | None = None,
        follow: bool = False,
        *,
        node: int | None = None,
        rank: int | None = None,
        all_nodes: bool = False,
        tail: int | None = None,
    ) -> Iterator[str]:
        """The trainer's log lines: node 0's Pod by default; TrainerClient's `step`
        (`node-1` is node 1's Pod), or `node`, or the Pod of global `rank`; `all_nodes`
        gives every Pod's, each line prefixed `[pod] ` (as `ddpjob logs --all`). `follow`
        streams until the containers end. The job and its Pods are looked up at once
        (ClusterError now, not at the first line)."""
        if step is not None:
            if node is not None or rank is not None or all_nodes:
                raise TypeError("get_job_logs(): give step= or node=/rank=/all_nodes=, not both")
            node = node_of_step(step)
        lines = self._backend.log_lines(name, node, rank, all_nodes, follow, tail)
        if not all_nodes:
            return (line for _, line in lines)
        return (f"[{pod}] {line}" for pod, line in lines)

    # ---- change --------------------------------------------------------------------

    def delete_job(self, name: str) -> None:
        """Delete the job; its Pods and Service go with it (in the background). On this
        machine: its processes are stopped."""
        self._backend.delete(name)

    def suspend_job(self, name: str) -> None:
        """Delete the job's Pods and keep the job (`Suspended`); resume_job starts them again."""
        self._backend.suspend(name, True)

    def resume_job(self, name: str) -> None:
        self._backend.suspend(name, False)


def node_of_step(step: str) -> int:
    """TrainerClient's `node-K` step as node K; a DDPJob has no other step."""
    match = NODE_STEP.fullmatch(step) if isinstance(step, str) else None
    if match is None:
        raise ValueError(
            f"step: {step!r} is not a step of a DDPJob: its steps are node-0, node-1, ... (one Pod per node)"
        )
    return int(match.group(1))
