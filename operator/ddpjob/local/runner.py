"""`ddpjob run`: the very same DDPJob on one machine, no cluster.

Each rendered Pod's trainer container becomes a local process group with exactly the
Pod's env, except that the rendezvous points at 127.0.0.1 and a free port. Restarts,
deadlines and the final status come from the same `lifecycle.plan()` the operator uses.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import IO

import yaml

from ddpjob import render
from ddpjob.job import lifecycle
from ddpjob.local import ownership
from ddpjob.local.container import ContainerProcess, LocalRunError, start_container
from ddpjob.job.observe import PodState
from ddpjob.api.spec import DDPJob

POLL_SECONDS = 0.1


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def local_overrides(port: int, checkpoint_dir: Path | None) -> dict[str, str]:
    """Contract values that only make sense in a cluster, pointed at this machine."""
    env = {"MASTER_ADDR": "127.0.0.1", "PET_MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(port), "PET_MASTER_PORT": str(port)}
    if checkpoint_dir is not None:
        env["DDPJOB_CHECKPOINT_DIR"] = str(checkpoint_dir)
    return env


class LocalRunner:
    """Plays the part of operator and kubelet for one job, in this process."""

    def __init__(self, job: DDPJob, workdir: Path, out: IO[str] | None = None, stop_grace: float = 10.0):
        self.job = job
        self.out = out or sys.stdout
        self.workdir = workdir
        self.stop_grace = stop_grace
        self.checkpoint_dir = (workdir / "checkpoints") if job.checkpoint else None
        self.procs: dict[str, tuple[int, int, ContainerProcess]] = {}  # name -> (rank, attempt, process)
        self.status: dict = {}
        self.port: int | None = None
        self._interrupted = False
        # Every container of this run carries a tag under this prefix (see ownership.py).
        self.run_tag = f"ddpjob-run-{os.getpid()}-{uuid.uuid4().hex[:8]}/"

    def log(self, message: str) -> None:
        self.out.write(f"[ddpjob] {message}\n")
        self.out.flush()

    def observe(self) -> list[PodState]:
        states = []
        for name, (rank, attempt, proc) in self.procs.items():
            code = proc.poll()
            phase = "Running" if code is None else ("Succeeded" if code == 0 else "Failed")
            finished = (lifecycle.format_time(datetime.fromtimestamp(proc.finished_at, timezone.utc))
                        if proc.finished_at else None)
            states.append(PodState(name=name, node_rank=rank, restart_count=attempt, phase=phase,
                                   exit_code=code if code not in (None, 0) else None,
                                   reason="Error" if code else None, finished_at=finished,
                                   deleting=proc.stop_requested_at is not None and code is None))
        return states

    def apply(self, plan: lifecycle.Plan) -> None:
        for name in plan.delete:
            if name in self.procs:
                proc = self.procs[name][2]
                if proc.poll() is None:
                    proc.stop(self.stop_grace)
                else:
                    del self.procs[name]
        if plan.create:
            if not self.procs:
                # A fresh port per attempt: the last attempt's store may still hold the old one.
                self.port = free_port()
            overrides = local_overrides(self.port, self.checkpoint_dir)
            for rank in plan.create:
                pod = render.render_pod(self.job, rank, plan.restart_count)
                proc = start_container(pod, overrides, out=self.out, tag=self.run_tag + uuid.uuid4().hex,
                                       preexec=ownership.die_with_parent)
                self.procs[pod["metadata"]["name"]] = (rank, plan.restart_count, proc)
            self.log(f"started {len(plan.create)} node(s), attempt {plan.restart_count}, "
                     f"rendezvous 127.0.0.1:{self.port}")

    def _escalate_stops(self) -> None:
        for _, _, proc in self.procs.values():
            if proc.stop_requested_at is not None:
                proc.stop(self.stop_grace)

    def run(self) -> dict:
        lock = ownership.JobLock(self.workdir, self.job.name)
        lock.acquire()  # before anything is written: a concurrent run of this job is refused
        watchdog = ownership.Watchdog(self.run_tag)
        try:
            return self._run()
        finally:
            watchdog.close()
            lock.release()

    def _run(self) -> dict:
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.checkpoint_dir:
            self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        # SIGHUP: the terminal closed. Each stops the whole job, in order.
        old_handlers = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        try:
            while True:
                if self._interrupted:
                    return self._shutdown()
                plan = lifecycle.plan(self.job, self.observe(), self.status, datetime.now(timezone.utc))
                if plan.status.get("phase") != self.status.get("phase"):
                    self.log(f"phase {plan.status['phase']}: {plan.status.get('message', '')}")
                elif plan.status.get("restarts") != self.status.get("restarts"):
                    self.log(plan.status.get("message", ""))
                self.status = plan.status
                self.apply(plan)
                self._escalate_stops()
                if self.status.get("phase") in lifecycle.FINISHED and not any(
                        p.poll() is None for _, _, p in self.procs.values()):
                    return self.status
                time.sleep(POLL_SECONDS)
        finally:
            for sig, handler in old_handlers.items():
                signal.signal(sig, handler)
            self._stop_all()

    def _on_signal(self, signum, frame) -> None:
        self._interrupted = True

    def _stop_all(self) -> None:
        deadline = time.time() + self.stop_grace
        for _, _, proc in self.procs.values():
            proc.stop(self.stop_grace)
        while any(p.poll() is None for _, _, p in self.procs.values()) and time.time() < deadline:
            time.sleep(POLL_SECONDS)
        for _, _, proc in self.procs.values():
            if proc.poll() is None:
                proc.kill_tree()
                proc.wait(5)

    def _shutdown(self) -> dict:
        self.log("interrupted: stopping every process")
        self._stop_all()
        now = lifecycle.format_time(datetime.now(timezone.utc))
        self.status = {**self.status, "phase": lifecycle.FAILED, "message": "interrupted by the user",
                       "completionTime": now, "readyNodes": 0}
        return self.status


def run_job(job: DDPJob, workdir: Path | None = None, out: IO[str] | None = None) -> int:
    """Run to completion; print the final status; exit code 0 only for Succeeded."""
    runner = LocalRunner(job, workdir or Path(os.getcwd()) / ".ddpjob" / job.name, out=out)
    try:
        status = runner.run()
    except LocalRunError as exc:
        runner.log(f"error: {exc}")
        return 1
    runner.out.write("---\n" + yaml.safe_dump({"status": status}, sort_keys=False))
    runner.out.flush()
    if status.get("phase") == lifecycle.SUCCEEDED:
        return 0
    return 130 if status.get("message") == "interrupted by the user" else 1
