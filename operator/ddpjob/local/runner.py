"""`ddpjob run`: the very same DDPJob on one machine, no cluster.

Each rendered Pod's trainer container becomes a local process group with exactly the
Pod's env, except that the rendezvous points at 127.0.0.1 and a free port. Restarts,
deadlines and the final status come from the job logic the operator uses (`lifecycle.plan`,
which is `lifecycle.decide` from what a local run knows).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import yaml

from ddpjob import contract, render, text
from ddpjob.api.spec import DDPJob
from ddpjob.job import elastic, lifecycle
from ddpjob.job.observe import PodState
from ddpjob.local import job_dir, ownership, safety, tensorboard_server
from ddpjob.local.container import ContainerProcess, LocalRunError
from ddpjob.local.gpus import devices_for_node
from ddpjob.local.node import LocalNode
from ddpjob.local.notices import LocalNotices
from ddpjob.local.progress_view import AttemptProgress, Display, write_line

POLL_SECONDS = 0.1
PROGRESS_READ_SECONDS = 1.0  # the heartbeats themselves are written once a second
INTERRUPTED_CODE = 130  # the run stopped by Ctrl-C (128 + SIGINT)


class LocalRunner:
    """Plays the part of operator and kubelet for one job, in this process."""

    def __init__(
        self,
        job: DDPJob,
        workdir: Path,
        out: IO[str] | None = None,
        stop_grace: float = 10.0,
        gpus: list[str] | None = None,
        hide_gpus: bool = False,
    ):
        self.job = job
        self.gpus = gpus or []  # this machine's GPU ids, shared out between the nodes
        self.hide_gpus = hide_gpus  # `--cpu`: the trainer sees no GPU either
        self.out = out or sys.stdout
        self.workdir = workdir
        self.stop_grace = stop_grace
        self.checkpoint_dir = (workdir / job_dir.CHECKPOINTS_DIR) if job.checkpoint else None
        # Where the trainer writes its event files: this run's folder (job_dir.tensorboard_run).
        self.tensorboard_env = {contract.TENSORBOARD_DIR: str(workdir / job_dir.TENSORBOARD_DIR)}
        self.procs: dict[str, tuple[int, int, ContainerProcess]] = {}  # name -> (rank, attempt, process)
        self.ips: dict[str, str] = {}  # name -> the Pod's address, where its launcher takes notices
        self.notices = LocalNotices()
        self.status: dict = {}
        self.port: int | None = None
        self._interrupted = False
        self.attempt_progress: AttemptProgress | None = None
        self.display = Display(self.out, job.name)
        self.output = "summary"  # how the run ends (report): `ddpjob run -o`
        self._progress_read_at = 0.0
        # Every container of this run carries a tag under this prefix (see ownership.py).
        self.run_tag = f"ddpjob-run-{os.getpid()}-{uuid.uuid4().hex[:8]}/"
        self.node = LocalNode(self.run_tag, stop_grace, preexec=ownership.die_with_parent)

    def log(self, message: str) -> None:
        write_line(self.out, f"[ddpjob] {message}\n")  # above the live progress line, if any

    def report(self, status: dict) -> None:
        """How the run ended: a line, or (`-o yaml`) the whole status as a YAML document."""
        said = f"[ddpjob] {job_dir.summary(status, self.workdir)}\n" if self.output != "yaml" else None
        write_line(self.out, said or "---\n" + yaml.safe_dump({"status": status}, sort_keys=False))

    def observe(self) -> list[PodState]:
        states = []
        for name, (rank, attempt, proc) in self.procs.items():
            end = proc.terminated()
            finished = lifecycle.format_time(datetime.fromtimestamp(end.finished_at, UTC)) if end else None
            states.append(
                PodState(
                    name=name,
                    node_rank=rank,
                    restart_count=attempt,
                    phase=end.phase if end else "Running",
                    exit_code=end.exit_code if end and end.exit_code else None,
                    reason=end.reason if end and end.exit_code else None,
                    finished_at=finished,
                    message=text.clean(end.message) if end and end.message else None,
                    deleting=proc.stop_requested_at is not None and end is None,
                )
            )
        return states

    def apply(self, plan: lifecycle.Plan) -> None:
        if plan.tell_lost:  # before the deletes, as the operator does
            lost = {id(self.procs[n][2]): self.procs[n][0] for n in plan.tell_lost if n in self.procs}
            self.notices.tell(
                lost,
                [
                    self.ips[n]
                    for n, (_, _, p) in self.procs.items()
                    if n not in plan.tell_lost and n in self.ips and p.poll() is None and p.stop_requested_at is None
                ],
            )
        for name in plan.delete:
            if name in self.procs:
                proc = self.procs[name][2]
                if proc.poll() is None:
                    proc.stop(self.stop_grace)
                else:
                    del self.procs[name]
        if plan.create:
            # A fresh port per attempt: the last attempt's store may still hold the old one.
            self.port = self.node.port_for(plan.restart_count)
            checkpoint = str(self.checkpoint_dir) if self.checkpoint_dir else None
            if self.attempt_progress is None or self.attempt_progress.attempt != plan.restart_count:
                self.attempt_progress = AttemptProgress(plan.restart_count, {})
            for rank in plan.create:
                pod = render.with_notice_token(
                    render.render_pod(self.job, rank, plan.restart_count), self.job, self.notices.token
                )
                name = pod["metadata"]["name"]
                # The record moves from the Pod's emptyDir to a directory per Pod and attempt.
                progress_dir = self.workdir / job_dir.PODS_DIR / f"{name}-a{plan.restart_count}"
                # In a Pod the record's directory is an emptyDir that exists before the
                # container starts; a script that writes a temporary file beside the record
                # and renames it (the README's recipe) needs it here too.
                progress_dir.mkdir(parents=True, exist_ok=True)
                progress_file = str(progress_dir / "progress.json")
                gpus = {"CUDA_VISIBLE_DEVICES": ""} if self.hide_gpus else {}
                env = {**gpus, **devices_for_node(self.job, rank, self.gpus), **self.tensorboard_env}
                started = self.node.start(
                    pod,
                    port=self.port,
                    checkpoint_dir=checkpoint,
                    progress_file=progress_file,
                    out=self.out,
                    extra_env=env,
                )
                proc, host = started.proc, started.ip
                self.procs[name], self.ips[name] = (rank, plan.restart_count, proc), host
                self.attempt_progress.files[rank] = progress_file
                if rank == 0:
                    self.log(f"progress of {name}: http://{host}:{contract.DEFAULT_PROGRESS_PORT}/progress")
            self.log(
                f"started {len(plan.create)} node(s), attempt {plan.restart_count}, rendezvous 127.0.0.1:{self.port}"
            )

    def read_progress(self):
        """The current attempt's ProgressState, read at most once a second (None between)."""
        if self.attempt_progress is None or time.monotonic() - self._progress_read_at < PROGRESS_READ_SECONDS:
            return None
        self._progress_read_at = time.monotonic()
        return self.attempt_progress.state()

    def _escalate_stops(self) -> None:
        for _, _, proc in self.procs.values():
            if proc.stop_requested_at is not None:
                proc.stop(self.stop_grace)

    def run(self) -> dict:
        watchdog = ownership.Watchdog(self.run_tag)  # kills what is left if this process dies
        try:
            return self._run()
        finally:
            watchdog.close()

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
                progress = self.read_progress()
                plan = lifecycle.plan(self.job, self.observe(), self.status, datetime.now(UTC), progress)
                self.display.update(progress)
                if plan.status.get("phase") != self.status.get("phase"):
                    self.log(f"phase {plan.status['phase']}: {plan.status.get('message', '')}")
                elif plan.status.get("restarts") != self.status.get("restarts"):
                    self.log(plan.status.get("message", ""))
                for event in plan.events:  # an elastic job's resizes, as the operator's Events say them
                    if event.reason in elastic.RESIZE_EVENTS:
                        self.log(f"{event.reason}: {event.message}")
                self.status = plan.status
                self.apply(plan)
                self._escalate_stops()
                if self.status.get("phase") in lifecycle.FINISHED and not any(
                    p.poll() is None for _, _, p in self.procs.values()
                ):
                    return self.status
                time.sleep(POLL_SECONDS)
        finally:
            for sig, handler in old_handlers.items():
                signal.signal(sig, handler)
            self.display.close()
            self._stop_all()

    def _on_signal(self, signum, frame) -> None:
        self._interrupted = True

    def _stop_all(self) -> None:
        self.node.stop_all(proc for _, _, proc in self.procs.values())

    def _shutdown(self) -> dict:
        self.log("interrupted: stopping every process")
        self._stop_all()
        self.status = lifecycle.interrupted(self.status, self.job.nodes, datetime.now(UTC))
        return self.status


def run_job(
    job: DDPJob,
    workdir: Path | None = None,
    out: IO[str] | None = None,
    fresh: bool = False,
    gpus: list[str] | None = None,
    hide_gpus: bool = False,
    allow_env: bool = False,
    tensorboard: bool = False,
    output: str = "summary",
) -> int:
    """Run to completion; end with a line of summary (`output` "yaml": the final status
    document); exit code 0 only for Succeeded. `tensorboard`: serve the job's curves from
    its start until Ctrl-C, the job's end included (tensorboard_server.py)."""
    if not job.generation:
        # A file has no metadata.generation; the API server gives a new object 1.
        job = dataclasses.replace(job, generation=1)
    workdir = workdir or Path(os.getcwd()) / ".ddpjob" / job.name
    runner = LocalRunner(job, workdir, out=out, gpus=gpus, hide_gpus=hide_gpus)
    runner.output = output
    # Before anything in the job's directory is touched (--fresh included): a second run
    # of the same job would share and overwrite its checkpoints.
    lock = ownership.JobLock(workdir, job.name)
    try:
        safety.refuse_unvetted_env(job.env, allow_env, job.template)
        safety.refuse_links(workdir)
        lock.acquire()
    except LocalRunError as exc:
        runner.log(f"error: {exc}")
        return 1
    board = tensorboard_server.for_job(workdir, job.name) if tensorboard else None
    try:
        code = _run_locked(runner, workdir, fresh, board)
        lock.release()  # another run of the job may start while the curves are shown
        if board is not None and board.url and code != INTERRUPTED_CODE:
            board.serve_until_stopped(runner.log)
        return code
    finally:
        lock.release()
        if board is not None:
            board.stop()


def _run_locked(
    runner: LocalRunner, workdir: Path, fresh: bool, board: tensorboard_server.TensorBoardServer | None = None
) -> int:
    if fresh:
        job_dir.start_fresh(workdir)
    job_dir.forget_progress(workdir)
    done = job_dir.nothing_to_run(workdir, runner.checkpoint_dir, runner.job)
    if done:
        runner.log(done)
        runner.report(job_dir.previous_run(workdir) or {})
        return 0
    if note := job_dir.earlier_run(workdir, runner.checkpoint_dir):
        runner.log(note)
    run = job_dir.tensorboard_run(workdir, runner.checkpoint_dir, datetime.now(UTC))
    runner.tensorboard_env = {contract.TENSORBOARD_DIR: str(run)}
    try:
        if board is not None:
            board.open(runner.log, run.name)
        status = runner.run()
    except LocalRunError as exc:
        runner.log(f"error: {exc}")
        return 1
    if curve := job_dir.loss_curve(workdir, run):
        runner.log(curve)
    runner.report(status)
    try:
        safety.write_no_follow(workdir / job_dir.STATUS_FILE, yaml.safe_dump({"status": status}, sort_keys=False))
        safety.write_no_follow(workdir / job_dir.SPEC_FILE, job_dir.spec_digest(runner.job))
    except LocalRunError as exc:
        runner.log(f"error: {exc}")
        return 1
    if status.get("phase") == lifecycle.SUCCEEDED:
        return 0
    return INTERRUPTED_CODE if status.get("message") == lifecycle.INTERRUPTED else 1
