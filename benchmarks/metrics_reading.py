"""How long a job's metrics log takes to read back as curves: `ddpjob plot`, `ddpjob run`'s
summary (ddpjob.curves.reader.read + curves), and `ddpjob describe`'s loss curve from a
Pod's log (reader.read_log).

Three files of N records each (default 1,000,000), written as ddpjob-train writes them
(one JSON object a line, a step record with six scalars):

- "resume every 1,000": a long job with many restarts;
- "resume every 10": a hostile or broken file, a resume record every 10 records going back
  5 steps (the forward reading dropped every series' later points at each one: quadratic);
- "one position": a job that never restarted.

For each: the seconds to read the file and build the step and epoch curves, and then
`ddpjob plot` end to end on it (matplotlib drawing the curves, `--no-plot` to skip). And the
forward reading of older versions on the first 2k/4k/8k records of the hostile shape, to
show the growth it had. Then a Pod log of N progress lines, a tenth of them hostile.

    .venv/bin/python benchmarks/metrics_reading.py [--records 1000000] [--no-plot]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ddpjob.curves import reader
from ddpjob.curves.record import POSITIONS


def records(n: int, resume_every: int | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"event": "position", "step": 0}]
    step = 0
    for i in range(1, n):
        if resume_every and i % resume_every == 0:
            step = max(0, step - 5)
            out.append({"event": "resume", "step": step})
        elif i % 500 == 0:
            out.append({"event": "epoch", "step": step, "loss": 0.5, "accuracy": 0.9, "eval_loss": 0.6})
        else:
            step += 1
            out.append(
                {
                    "event": "step",
                    "step": step,
                    "epoch": 1 + step // 1000,
                    "loss": 2.0 / step,
                    "accuracy": 0.5,
                    "lr": 1e-3,
                    "samples_per_s": 5000.0,
                    "restart": 0,
                    "time": 1.8e9,
                }
            )
    return out


def forward(recs: list[dict[str, Any]]) -> None:
    """The forward reading older versions did (reader.curves before it went backwards)."""
    points: dict[str, dict[int, float]] = {}
    for rec in recs:
        step: int = rec["step"]  # every record of records() has one
        if rec.get("event") in POSITIONS:
            for series in points.values():
                for s in [s for s in series if s > step]:
                    del series[s]
        if rec.get("event") == "step":
            for key, value in rec.items():
                if isinstance(value, float) and math.isfinite(value):
                    points.setdefault(key, {})[step] = value


def timed(fn: Any) -> tuple[float, float, Any]:
    """Wall seconds, CPU seconds (this process and the children it waited for) and the
    result: on a shared machine the CPU time is the cost, the wall time what a user waits."""
    start, cpu = time.perf_counter(), _cpu()
    result = fn()
    return time.perf_counter() - start, _cpu() - cpu, result


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args()
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, every in (("resume every 1,000", 1000), ("resume every 10", 10), ("one position", None)):
            path = Path(tmp) / "metrics.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" for r in records(args.records, every)))

            def read_curves(path: Path = path) -> int:
                recs = reader.read(path)
                steps, _ = reader.curves(recs), reader.curves(recs, "epoch")
                return len(steps["loss"])

            seconds, cpu, points = timed(read_curves)
            line = (
                f"{name}: {args.records:,} records ({path.stat().st_size / 2**20:.0f} MiB) read as curves in "
                f"{seconds:.2f} s ({cpu:.2f} s CPU; {points:,} loss points)"
            )
            if not args.no_plot:
                plot = [sys.executable, "-m", "ddpjob.cli", "plot", str(path), "-o", str(Path(tmp) / "loss.png")]
                seconds, cpu, done = timed(
                    lambda plot=plot: subprocess.run(plot, capture_output=True, text=True, timeout=1200)
                )
                line += (
                    f"; ddpjob plot {seconds:.2f} s ({cpu:.2f} s CPU)"
                    if done.returncode == 0
                    else f"; plot failed: {done.stderr}"
                )
            print(line, flush=True)
        hostile = records(8000, 10)
        growth = [f"{n // 1000}k {timed(lambda n=n: forward(hostile[:n]))[1]:.2f} s CPU" for n in (2000, 4000, 8000)]
        print(f"the forward reading, resume every 10: {', '.join(growth)}")
        log = "\n".join(
            f"[pod-0] epoch 1/9 step {s} loss {1 / s:.4f} acc 0.5000 9 samples/s"
            if s % 10
            else f"[pod-0] epoch 1/9 step {s} loss - acc 0.5"
            for s in range(1, args.records)
        )
        seconds, cpu, (points, bad) = timed(lambda: reader.read_log(log))
        print(
            f"a Pod log of {args.records:,} progress lines, a tenth of them hostile: {seconds:.2f} s "
            f"({cpu:.2f} s CPU; {len(points):,} points, {len(bad):,} lines said)"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"peak memory of this process: {peak:.1f} GiB ({args.records:,} records held as dicts)")


if __name__ == "__main__":
    main()
