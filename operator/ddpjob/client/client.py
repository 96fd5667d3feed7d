"""`DDPJobClient`: DDPJobs on a cluster from Python (a notebook, a pipeline step).

Modelled on Kubeflow Trainer's `TrainerClient` (train, get_job, list_jobs,
wait_for_job_status, get_job_logs, delete_job) and built on the cluster layer the
`ddpjob` command's cluster commands stand on (ddpjob/cluster/: the kubeconfig, jobs,
Pods, logs and Events), with the same checks before anything is sent (job_body.py).
Every failure is an exception with the one line the command prints: `ClusterError` (no
cluster, not found, forbidden, ...), `InvalidSpec` (each bad field), `JobFailed` and
`TimeoutError` from a wait.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ddpjob.client import job_body
from ddpjob.client.job_status import Job
from ddpjob.cluster import connection, events, jobs, logs, pods
from ddpjob.cluster.connection import ClusterError, Connection


class JobFailed(RuntimeError):
    """A wait ended in a phase not waited for (`Failed`, or `Succeeded` when waiting for
    `Running`); `job` is the job as it ended."""

    def __init__(self, job: Job):
        super().__init__(job.describe())
        self.job = job


class DDPJobClient:
    """DDPJobs in one namespace of the cluster of a kubeconfig, as `ddpjob` reaches it:
    `kubeconfig` (default `$KUBECONFIG`, then ~/.kube/config), `context`, `namespace`
    (default: the context's, else `default`); inside a Pod, its service account."""

    def __init__(self, namespace: str | None = None, kubeconfig: str | None = None, context: str | None = None):
        self._conn: Connection = connection.connect(kubeconfig, context, namespace)

    @property
    def namespace(self) -> str:
        return self._conn.namespace

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
        **spec: Any,
    ) -> str:
        """Create a DDPJob and return its name.

        `job` is a DDPJob as a dict or the path of its YAML file; or leave it out and give
        `image` and the rest (`command`, `args`, `nodes`, `nproc_per_node`, `gpus_per_node`,
        `env`, and any other spec field as a keyword: `restart_policy="ExitCode"`,
        `checkpoint={...}`). `name` overrides the job's; without either, one is drawn.
        The job is checked first (InvalidSpec names each bad field; `template_allow` as
        `ddpjob submit --template-allow`). A job of that name already there is an error:
        delete it first (a finished job never runs again under its name)."""
        if job is not None:
            extra = {"image": image, "command": command, "args": args or None, "env": env, **spec}
            given = [k for k, v in extra.items() if v is not None]
            if given or nodes != 1 or nproc_per_node != "auto" or gpus_per_node:
                raise TypeError(f"train(): give a job (dict or file), or arguments for one, not both ({given})")
            body = job_body.from_source(job)
            said = os.fspath(job) if not isinstance(job, Mapping) else "train()"
        elif image is None:
            raise TypeError("train(): give a job (dict or file), or at least image=")
        else:
            body = job_body.from_arguments(image, command, args, nodes, nproc_per_node, gpus_per_node, env or {}, spec)
            said = "train()"
        body, model = job_body.checked(body, name, self.namespace, template_allow, said)
        try:
            jobs.create_job(self._conn, body)
        except ClusterError as exc:
            if exc.status == 409:  # AlreadyExists: say the way out
                raise ClusterError(
                    f"ddpjob {model.name} already exists in namespace {self.namespace}: "
                    f"delete_job({model.name!r}) first, or give another name",
                    status=exc.status,
                ) from exc
            raise
        return model.name

    # ---- read ----------------------------------------------------------------------

    def get_job(self, name: str) -> Job:
        """The job as the cluster has it now (ClusterError `not found: ...` if it has none)."""
        return Job.from_object(jobs.get_job(self._conn, name))

    def list_jobs(self) -> list[Job]:
        """Every DDPJob of the namespace, by name."""
        listing = jobs.list_jobs(self._conn)
        return sorted((Job.from_object(o) for o in listing.get("items") or []), key=lambda j: j.name)

    def get_job_events(self, name: str) -> list[dict[str, Any]]:
        """The job's own Events (Created, Running, Restarting, NodeLost, Failed, ...), oldest first."""
        listed = events.job_events(self._conn, name)
        return sorted(listed, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))

    def wait_for_job_status(
        self,
        name: str,
        status: Iterable[str] = ("Succeeded",),
        timeout: float = 600.0,
        polling_interval: float = 2.0,
        callbacks: Iterable[Callable[[Job], None]] = (),
        progress: bool = True,
    ) -> Job:
        """Poll the job until its phase is one of `status`, and return it. Each change of
        phase, restarts or progress is printed as one line (`progress=False`: quiet) and
        passed to every callback. A job that ends in a phase not waited for raises
        JobFailed; `timeout` seconds without raises TimeoutError."""
        wanted = frozenset(status)
        deadline = time.monotonic() + timeout
        last: str | None = None
        while True:
            job = self.get_job(name)
            now = job.describe()
            if now != last:
                last = now
                if progress:
                    print(now, file=sys.stdout, flush=True)
                for callback in callbacks:
                    callback(job)
            if job.phase in wanted:
                return job
            if job.finished:
                raise JobFailed(job)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{name}: not {' or '.join(sorted(wanted))} after {timeout:g}s (phase {job.phase})")
            time.sleep(min(polling_interval, left))

    def get_job_logs(
        self,
        name: str,
        node: int | None = None,
        rank: int | None = None,
        all_nodes: bool = False,
        follow: bool = False,
        tail: int | None = None,
    ) -> Iterator[str]:
        """The trainer's log lines: node 0's Pod by default, the Pod of `node`, or of global
        `rank`; `all_nodes` gives every Pod's, each line prefixed `[pod] ` (as `ddpjob logs
        --all`). `follow` streams until the containers end. The job and its Pods are looked
        up at once (ClusterError now, not at the first line)."""
        job = jobs.get_job(self._conn, name)
        chosen = pods.select(job, pods.job_pods(self._conn, name), node=node, rank=rank, every=all_nodes)
        streams = logs.merged(
            self._conn, [p["metadata"]["name"] for p in chosen[: None if all_nodes else 1]], follow, tail
        )
        if not all_nodes:
            return (line for _, line in streams)
        return (f"[{pod}] {line}" for pod, line in streams)

    # ---- change --------------------------------------------------------------------

    def delete_job(self, name: str) -> None:
        """Delete the job; its Pods and Service go with it (in the background)."""
        jobs.delete_job(self._conn, name)

    def suspend_job(self, name: str) -> None:
        """Delete the job's Pods and keep the job (`Suspended`); resume_job starts them again."""
        jobs.set_suspended(self._conn, name, True)

    def resume_job(self, name: str) -> None:
        jobs.set_suspended(self._conn, name, False)
