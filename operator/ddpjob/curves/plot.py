"""A job's training loss and throughput drawn as a PNG (`ddpjob plot`, cli/plot.py, which
finds the files of the job it names).

Its curves are read by reader.py from its metrics.jsonl, or from its TensorBoard event
files when it has none (a job without `spec.checkpoint`): one curve through restarts and
resumes, as TensorBoard draws them, each resume and resize marked with a dotted line.
Needs matplotlib (`pip install 'ddpjob[plot]'`), imported only inside `draw`, so neither
the operator's image nor the trainer's carries it.
"""

from __future__ import annotations

from pathlib import Path

from ddpjob.curves import reader, record

MAX_MARKS = 100  # resume and resize lines drawn: a file of a million resumes draws the last 100
MAX_POINTS = 20_000  # a curve's points drawn: an 800-pixel-wide plot shows no more (thin())


class PlotError(ValueError):
    """Nothing can be drawn (no matplotlib, no loss logged): one line saying why."""


def positions(records: list[dict]) -> list[tuple[int, str]]:
    """Where training went on from after a resume or a resize: (step, what), each place
    once, the last MAX_MARKS."""
    marks = {
        (r["step"], str(r["event"])): None
        for r in records
        if r.get("event") in ("resume", "resize")
        and isinstance(r.get("step"), int)
        and not isinstance(r["step"], bool)
        and 0 <= r["step"] <= record.MAX_STEP
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
    """Write the PNG; the number of loss points drawn. PlotError when there is nothing to draw."""
    try:
        import matplotlib
    except ImportError:
        raise PlotError("`ddpjob plot` needs matplotlib: pip install 'ddpjob[plot]'") from None
    matplotlib.use("Agg")  # files only: no display is needed or opened
    import matplotlib.pyplot as plt

    records = reader.read(metrics)  # once: each pass over it is linear (the benchmark: metrics_reading.py)
    steps = reader.curves(records) if records else reader.from_event_files(logdir)
    epochs = reader.curves(records, "epoch") if records else reader.from_event_files(logdir, "epoch")
    loss = steps.get("loss", [])
    if not loss:
        raise PlotError(f"{title}: no training loss logged yet (in {metrics} or {logdir})")
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
