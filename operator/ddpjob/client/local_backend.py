"""The Python client's jobs on this machine (`LocalProcessBackendConfig`), as Kubeflow
Trainer's `LocalProcessBackend` runs TrainJobs: each job run by `ddpjob run`'s runner in
a process of its own (local/background.py), its checkpoints under `workdir/<name>`.

The same calls as on a cluster, read from what the runner says: the phase and its
message, the final status it writes, each Pod's `[pod]` lines as its log, its phase
changes as Events (without times). A job is known to the client that started it;
`delete_job` stops it (its directory stays, for the next run to resume from).
`suspend_job` has no local meaning and says so.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from ddpjob.api import names
from ddpjob.client.backend_configs import LocalProcessBackendConfig
from ddpjob.client.events import Event
from ddpjob.client.job_status import Job
from ddpjob.cluster import pods
from ddpjob.cluster.connection import ClusterError

NAMESPACE = "default"  # what a job file without one gets: the runner's Pods are named for it


@dataclass
class LocalJob:
    body: dict[str, Any]
    run: Any  # ddpjob.local.background.BackgroundRun (imported with the backend's first job)
    files: Path  # the job's file and the run's output
    created: str


class LocalProcessBackend:
    def __init__(self, config: LocalProcessBackendConfig):
        self.root = Path(config.workdir) if config.workdir else Path.cwd() / ".ddpjob"
        self.allow_env = config.allow_env
        self.jobs: dict[str, LocalJob] = {}

    @property
    def namespace(self) -> str:
        return NAMESPACE

    def create(self, body: Mapping[str, Any]) -> None:
        from ddpjob.local.background import BackgroundRun  # the process machinery, only here

        name = body["metadata"]["name"]
        if name in self.jobs:
            raise ClusterError(f"ddpjob {name} already exists here: delete_job({name!r}) first, or give another name")
        files = Path(tempfile.mkdtemp(prefix=f"ddpjob-{name}-"))
        (files / "job.yaml").write_text(yaml.safe_dump(dict(body), sort_keys=False))
        run = BackgroundRun(files / "job.yaml", self.root / name, files / "output.log", allow_env=self.allow_env)
        created = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.jobs[name] = LocalJob(dict(body), run, files, created)
        run.start()

    def _job(self, name: str) -> LocalJob:
        job = self.jobs.get(name)
        if job is None:
            raise ClusterError(f"not found: ddpjob {name} among the jobs this client runs here")
        return job

    def _object(self, job: LocalJob) -> dict[str, Any]:
        meta = {**job.body["metadata"], "creationTimestamp": job.created}
        return {**job.body, "metadata": meta, "status": job.run.status()}

    def get(self, name: str) -> Job:
        return Job.from_object(self._object(self._job(name)))

    def find(self, labels: Mapping[str, str] | None) -> list[Job]:
        wanted = dict(labels or {})
        return [
            Job.from_object(self._object(job))
            for job in self.jobs.values()
            if wanted.items() <= dict(job.body["metadata"].get("labels") or {}).items()
        ]

    def events(self, name: str) -> list[Event]:
        return [
            Event("DDPJob", name, phase, message, None, "Warning" if phase in ("Restarting", "Failed") else "Normal")
            for phase, message in self._job(name).run.phases()
        ]

    def log_lines(
        self, name: str, node: int | None, rank: int | None, every: bool, follow: bool, tail: int | None
    ) -> Iterator[tuple[str, str]]:
        """`(pod, line)` of the Pods asked for, from the run's output: each Pod's lines of
        every attempt (a restarted Pod keeps its name). `tail`: the last lines of each Pod
        written so far, then (`follow`) the new ones."""
        from ddpjob.local.background import LineReader

        job = self._job(name)
        nodes = int(job.body["spec"].get("nodes", 1))
        every_pod = [
            {"metadata": {"name": names.pod_name(name, k), "labels": {names.LABEL_NODE_RANK: str(k)}}}
            for k in range(nodes)
        ]
        chosen = pods.select(self._object(job), every_pod, node=node, rank=rank, every=every)
        prefixes = {f"[{p['metadata']['name']}] ": p["metadata"]["name"] for p in chosen}
        reader = LineReader(job.run.output)

        def mine(lines: Iterator[str]) -> Iterator[tuple[str, str]]:
            for line in lines:
                prefix = line[: line.find("] ") + 2] if line.startswith("[") else ""
                if prefix in prefixes:
                    yield prefixes[prefix], line[len(prefix) :]

        def read() -> Iterator[tuple[str, str]]:
            if tail is not None:
                kept: dict[str, deque[tuple[int, str, str]]] = {p: deque(maxlen=tail) for p in prefixes.values()}
                for i, (pod, line) in enumerate(mine(job.run.lines(False, reader))):
                    kept[pod].append((i, pod, line))
                yield from ((pod, line) for _, pod, line in sorted(x for d in kept.values() for x in d))
                if not follow:
                    return
            yield from mine(job.run.lines(follow, reader))

        return read()

    def delete(self, name: str) -> None:
        job = self._job(name)
        job.run.stop()
        del self.jobs[name]
        shutil.rmtree(job.files, ignore_errors=True)

    def suspend(self, name: str, suspend: bool) -> None:
        self._job(name)
        verb = "suspend_job" if suspend else "resume_job"
        raise ClusterError(f"{verb}: a job run on this machine is not suspended; delete_job({name!r}) stops it")
