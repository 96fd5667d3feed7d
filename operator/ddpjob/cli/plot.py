"""`ddpjob plot JOB -o loss.png`: a job's training loss and throughput as a PNG, for a
report or an issue.

JOB is a job run here (`./.ddpjob/<JOB>`, the place `ddpjob run` keeps it), a job's
directory, or a metrics.jsonl; its curves are read by `ddpjob.metrics_log` from its
metrics.jsonl, or from its TensorBoard event files when it has none (a job without
`spec.checkpoint`): one curve through restarts and resumes, as TensorBoard draws them,
each resume and resize marked with a dotted line. A cluster job's metrics.jsonl lies on its checkpoint volume:
copy it out (`kubectl cp`) and plot the file. Needs matplotlib (`pip install
'ddpjob[plot]'`), imported only here, so the operator's image never carries it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ddpjob import metrics_log
from ddpjob.api.job_file import FileError

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
            (d / CHECKPOINTS / metrics_log.FILE, d / TENSORBOARD),
            (d / metrics_log.FILE, d / TENSORBOARD),
        ):
            if metrics.is_file() or logdir.is_dir():
                from ddpjob.local.job_dir import latest_run  # `ddpjob run` keeps a folder per run

                return metrics, latest_run(logdir)
    looked = ", ".join(str(d) for d in dirs) or str(given)
    raise FileError(
        f"JOB {job!r}: no metrics.jsonl or tensorboard/ directory in {looked} "
        "(`ddpjob run` keeps a job's in ./.ddpjob/<name>)"
    )


MAX_MARKS = 100  # resume and resize lines drawn: a file of a million resumes draws the last 100
MAX_POINTS = 20_000  # a curve's points drawn: an 800-pixel-wide plot shows no more (thin())


def positions(records: list[dict]) -> list[tuple[int, str]]:
    """Where training went on from after a resume or a resize: (step, what), each place
    once, the last MAX_MARKS."""
    marks = {
        (r["step"], str(r["event"])): None
        for r in records
        if r.get("event") in ("resume", "resize")
        and isinstance(r.get("step"), int)
        and not isinstance(r["step"], bool)
        and 0 <= r["step"] <= metrics_log.MAX_STEP
    }
    return list(marks)[-MAX_MARKS:]


def thin(points: list[tuple[int, float]], most: int = MAX_POINTS) -> list[tuple[int, float]]:
    """At most `most` of a curve's points, drawn the same at a plot's width: the curve cut
    into most // 2 runs of steps, each drawn by its lowest and highest point (in step
    order), so a spike or a dip stays. Matplotlib took a minute over a million points."""
    if len(points) <= most:
        return points
    runs = most // 2
    size = -(-len(points) // runs)
    kept: list[tuple[int, float]] = []
    for first in range(0, len(points), size):
        run = points[first : first + size]
        low, high = min(run, key=lambda p: p[1]), max(run, key=lambda p: p[1])
        kept += sorted({low, high})
    return kept


def draw(metrics: Path, logdir: Path, title: str, out: Path) -> int:
    """Write the PNG; the number of loss points drawn."""
    try:
        import matplotlib
    except ImportError:
        raise FileError("`ddpjob plot` needs matplotlib: pip install 'ddpjob[plot]'") from None
    matplotlib.use("Agg")  # files only: no display is needed or opened
    import matplotlib.pyplot as plt

    records = metrics_log.read(metrics)  # once: each pass over it is linear (the benchmark: metrics_reading.py)
    steps = metrics_log.curves(records) if records else metrics_log.from_event_files(logdir)
    epochs = metrics_log.curves(records, "epoch") if records else metrics_log.from_event_files(logdir, "epoch")
    loss = steps.get("loss", [])
    if not loss:
        raise FileError(f"{title}: no training loss logged yet (in {metrics} or {logdir})")
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(8, 5.5), dpi=100)
    top.plot(*zip(*thin(loss), strict=True), label="training loss", color="tab:blue")
    if epochs.get("eval_loss"):
        top.plot(*zip(*thin(epochs["eval_loss"]), strict=True), "o--", label="evaluation loss", color="tab:orange")
    top.set_ylabel("loss")
    top.set_title(title)
    throughput = steps.get("samples_per_s", [])
    if throughput:
        bottom.plot(*zip(*thin(throughput), strict=True), color="tab:green")
    bottom.set_ylabel("samples/s")
    bottom.set_xlabel("step")
    for step, what in positions(records):
        for ax in (top, bottom):
            ax.axvline(step, color="grey", linestyle=":", linewidth=1)
        top.annotate(what, (step, 1), xycoords=("data", "axes fraction"), fontsize=8, color="grey", va="top")
    top.legend(loc="upper right")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return len(loss)


def cmd_plot(args: argparse.Namespace) -> int:
    metrics, logdir = sources(args.job, args.workdir)
    n = draw(metrics, logdir, args.job, Path(args.output))
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
