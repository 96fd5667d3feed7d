"""`ddpjob plot JOB -o loss.png`: a job's training loss and throughput as a PNG, for a
report or an issue.

JOB is a job run here (`./.ddpjob/<JOB>`, the place `ddpjob run` keeps it), a job's
directory, or a metrics.jsonl: this module finds its files, and `ddpjob.curves.plot`
reads and draws them (with matplotlib, from the `plot` extra). A cluster job's
metrics.jsonl lies on its checkpoint volume: copy it out (`kubectl cp`) and plot the file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ddpjob.api.job_file import FileError
from ddpjob.curves import plot, record

CHECKPOINTS, TENSORBOARD = "checkpoints", "tensorboard"  # ddpjob.local.job_dir's names (imported lazily only)


def sources(job: str, workdir: str | None = None) -> tuple[Path, Path]:
    """(metrics.jsonl, event file directory) of what JOB names; FileError when neither is there."""
    given = Path(workdir) if workdir else Path(job)
    if not workdir and given.is_file():
        return given, given.parent / TENSORBOARD
    dirs = [given] if workdir or "/" in job or given.is_dir() else []
    if not workdir and "/" not in job:
        dirs.append(Path(".ddpjob") / job)
    for d in dirs:
        for metrics, logdir in (
            (d / CHECKPOINTS / record.FILE, d / TENSORBOARD),
            (d / record.FILE, d / TENSORBOARD),
        ):
            if metrics.is_file() or logdir.is_dir():
                from ddpjob.local.job_dir import latest_run  # `ddpjob run` keeps a folder per run

                return metrics, latest_run(logdir)
    looked = ", ".join(str(d) for d in dirs) or str(given)
    raise FileError(
        f"JOB {job!r}: no metrics.jsonl or tensorboard/ directory in {looked} "
        "(`ddpjob run` keeps a job's in ./.ddpjob/<name>)"
    )


def cmd_plot(args: argparse.Namespace) -> int:
    metrics, logdir = sources(args.job, args.workdir)
    try:
        n = plot.draw(metrics, logdir, args.job, Path(args.output))
    except plot.PlotError as exc:
        raise FileError(str(exc)) from None
    print(f"{args.output}: {n} loss points of {metrics if metrics.is_file() else logdir}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plot",
        help="write a job's loss and throughput curves as a PNG",
        description="Draw a job's training loss (and evaluation loss) and samples/s against the\n"
        "step, from its metrics.jsonl, into a PNG. JOB: a job run here (./.ddpjob/JOB),\n"
        "a job's directory, or a metrics.jsonl file.",
        epilog="examples:\n  ddpjob plot mnist-cpu -o loss.png\n  ddpjob plot ./metrics.jsonl -o loss.png",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("job", metavar="JOB", help="a job run here, its directory, or a metrics.jsonl")
    p.add_argument("-o", "--output", required=True, metavar="PNG", help="the picture to write")
    p.add_argument("--workdir", help="the job's directory, as given to `ddpjob run --workdir`")
    p.set_defaults(func=cmd_plot)
