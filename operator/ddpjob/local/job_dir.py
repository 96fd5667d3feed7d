"""A job's directory under `ddpjob run` (`./.ddpjob/<job name>` unless given): what it
holds, what an earlier run of the job left there, and `--fresh`.

    checkpoints/           the trainer's checkpoints, where a later run resumes from, and
                           its metrics.jsonl
    tensorboard/<run>/     the trainer's TensorBoard event files, a folder per run of the
                           job named by its start (contract.TENSORBOARD_DIR): one
                           TensorBoard run each, which never mix (`tensorboard_run`)
    pods/<pod>-a<attempt>/ each Pod attempt's progress record and heartbeats
    status.yaml            the final status of the last run
    spec.sha256            the digest of the job the last run ran (nothing_to_run)
    .ddpjob-run.lock       held while a run of the job lasts (ownership.JobLock)

The directory holds no links (`safety.refuse_links`, checked before anything here runs),
so nothing outside it is read or deleted.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from datetime import datetime
from pathlib import Path

import yaml

from ddpjob import times
from ddpjob.api.spec import DDPJob
from ddpjob.curves import reader, record, sparkline
from ddpjob.job import lifecycle

CHECKPOINTS_DIR = "checkpoints"
PODS_DIR = "pods"
TENSORBOARD_DIR = "tensorboard"
STATUS_FILE = "status.yaml"
SPEC_FILE = "spec.sha256"
# A run's folder under tensorboard/: its start, in UTC (`2026-11-29T08-19-30Z`, a name
# TensorBoard shows and sorts in time order), `-2`... when two start in one second.
RUN_NAME = re.compile(r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\dZ(-\d+)?")


def previous_run(workdir: Path) -> dict | None:
    """The final status an earlier `ddpjob run` of this job left in its workdir."""
    try:
        status = yaml.safe_load((workdir / STATUS_FILE).read_text())
    except (OSError, yaml.YAMLError):
        return None
    return status.get("status") if isinstance(status, dict) and isinstance(status.get("status"), dict) else None


def start_fresh(workdir: Path) -> None:
    """`--fresh`: forget an earlier run (its checkpoints, curves and final status)."""
    shutil.rmtree(workdir / CHECKPOINTS_DIR, ignore_errors=True)
    shutil.rmtree(workdir / TENSORBOARD_DIR, ignore_errors=True)
    (workdir / STATUS_FILE).unlink(missing_ok=True)


def forget_progress(workdir: Path) -> None:
    """An earlier run's progress records are not this run's: its attempt 0 would show the
    last run's `step 48/48 (100%)` until the trainer writes its first record."""
    shutil.rmtree(workdir / PODS_DIR, ignore_errors=True)


def earlier_run(workdir: Path, checkpoint_dir: Path | None) -> str | None:
    """What to say of an earlier run that finished here and left checkpoints this run's
    trainer resumes from (None: nothing to say)."""
    earlier = previous_run(workdir)
    if not (
        earlier and earlier.get("phase") in lifecycle.FINISHED and checkpoint_dir and any(checkpoint_dir.glob("*"))
    ):
        return None
    when = earlier.get("completionTime", "?")
    if earlier["phase"] == lifecycle.SUCCEEDED:
        return (
            f"this job already Succeeded here (at {when}): its program resumes from the checkpoints in "
            f"{checkpoint_dir} (ddpjob-train trains only what the job asks beyond them: more epochs). "
            "`ddpjob run --fresh` starts over"
        )
    return (
        f"this job ran here before ({earlier['phase']} at {when}); the trainer resumes from its "
        f"checkpoints in {checkpoint_dir}. `ddpjob run --fresh` starts over"
    )


def tensorboard_runs(logdir: Path) -> list[Path]:
    """The runs' folders under a job's tensorboard/, oldest first."""
    try:
        found = [d for d in logdir.iterdir() if RUN_NAME.fullmatch(d.name) and d.is_dir()]
    except OSError:
        return []
    return sorted(found, key=lambda d: (d.name[:20], int(d.name[21:] or 1)))


def latest_run(logdir: Path) -> Path:
    """Where the last run's event files are: its folder, else `logdir` itself (where a
    release before run folders wrote them)."""
    runs = tensorboard_runs(logdir)
    return runs[-1] if runs else logdir


def tensorboard_run(workdir: Path, checkpoint_dir: Path | None, started: datetime) -> Path:
    """This run's event file folder. A run that resumes from the checkpoints an earlier run
    left goes on with that run's curve, in its folder (the trainer's restart mark drops
    the steps it trains again); any other starts its own, named by `started`: every run of
    a job from step 0 appended to one folder, and TensorBoard purged one run's points for
    the next's ("Detected out of order event.step")."""
    logdir = workdir / TENSORBOARD_DIR
    runs = tensorboard_runs(logdir)
    if runs and checkpoint_dir is not None and any(checkpoint_dir.glob("*")):
        return runs[-1]
    name = started.strftime("%Y-%m-%dT%H-%M-%SZ")
    taken = {d.name for d in runs}
    suffix = next(n for n in range(1, len(taken) + 2) if (f"{name}-{n}" if n > 1 else name) not in taken)
    return logdir / (f"{name}-{suffix}" if suffix > 1 else name)


def loss_curve(workdir: Path, run: Path | None = None) -> str | None:
    """The logged training loss as one line of text (`ddpjob run`'s summary), if any:
    from the job's metrics.jsonl, else from `run`'s event files (the last run's)."""
    logdir = run or latest_run(workdir / TENSORBOARD_DIR)
    loss = reader.job_curves(workdir / CHECKPOINTS_DIR / record.FILE, logdir).get("loss")
    return sparkline.line("loss", [v for _, v in loss or []])


def summary(status: dict, workdir: Path) -> str:
    """The run's last line: how it ended, how long it took, and where its whole status is
    (the status document, with its acceptedSpec hashes, is `ddpjob run -o yaml`'s)."""
    said = [str(status.get("phase") or "Unknown")]
    try:
        start, end = times.parse_time(status.get("startTime")), times.parse_time(status.get("completionTime"))
    except ValueError:
        start = end = None
    if start and end:
        said.append(f"in {times.age((end - start).total_seconds())}")
    restarts = status.get("restarts")
    if isinstance(restarts, int) and restarts:
        said.append(f"after {restarts} gang restart{'s' if restarts > 1 else ''}")
    path = workdir / STATUS_FILE
    with_cwd = path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path
    return f"{' '.join(said)}; its whole status: {with_cwd} (`ddpjob run -o yaml` prints it)"


def spec_digest(job: DDPJob) -> str:
    """What tells one job from another here: its whole resolved model."""
    return hashlib.sha256(repr(job).encode()).hexdigest()


def nothing_to_run(workdir: Path, checkpoint_dir: Path | None, job: DDPJob) -> str | None:
    """What to say instead of running a job that Succeeded here with this very spec under
    ddpjob-train, which resumes from its final checkpoint and finds training complete: its
    processes would start, import torch and rendezvous to do nothing (None: run it)."""
    earlier = previous_run(workdir)
    words = {os.path.basename(w) for w in (*(job.command or ()), *job.args)}
    if not (
        earlier
        and earlier.get("phase") == lifecycle.SUCCEEDED
        and "ddpjob-train" in words
        and checkpoint_dir
        and any(checkpoint_dir.glob("*"))
    ):
        return None
    try:
        if (workdir / SPEC_FILE).read_text().strip() != spec_digest(job):
            return None
    except OSError:
        return None
    return (
        f"this job already Succeeded here (at {earlier.get('completionTime', '?')}) with this very spec: "
        f"ddpjob-train would resume from its final checkpoint in {checkpoint_dir} with nothing left to "
        "train, so nothing was started. `ddpjob run --fresh` trains it again"
    )
