"""The kind tier's curve check: the training loss a job's TensorBoard serves, read through
the URL `ddpjob tensorboard` printed (kubectl port-forward to the TensorBoard Pod), is the
loss the trainer logged in metrics.jsonl on the shared volume: every logged step once, each
value as logged (TensorBoard keeps a float32).

Usage: curve_check.py URL RUN METRICS_JSONL
Exit 0 with `N points` when they match; 1 with the difference; 2 when TensorBoard cannot
be read yet (the caller retries until its deadline).
"""

from __future__ import annotations

import json
import math
import sys
import urllib.error
import urllib.parse
import urllib.request

TAG = "train/loss"  # ddpjob.curves.record.TAGS["step"]["loss"]
MAX_BYTES = 8 * 1024 * 1024  # a short job's curve is a few KiB


def logged(path: str) -> dict[int, float]:
    """Step -> loss of the step records (a later record of a step is the one trained last)."""
    steps: dict[int, float] = {}
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line) if line.strip() else {}
            if record.get("event") == "step" and isinstance(record.get("loss"), int | float):
                steps[int(record["step"])] = float(record["loss"])
    return steps


def served(url: str, run: str) -> dict[int, float] | None:
    query = urllib.parse.urlencode({"tag": TAG, "run": run})
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/data/plugin/scalars/scalars?{query}", timeout=10) as reply:
            points = json.loads(reply.read(MAX_BYTES))
    except (OSError, urllib.error.URLError, ValueError) as exc:
        print(f"TensorBoard not read: {exc}", file=sys.stderr)
        return None
    return {int(step): float(value) for _, step, value in points}


def main(url: str, run: str, metrics: str) -> int:
    want = logged(metrics)
    got = served(url, run)
    if got is None:
        return 2
    if not want:
        print(f"no loss logged in {metrics}", file=sys.stderr)
        return 1
    missing, extra = sorted(want.keys() - got.keys()), sorted(got.keys() - want.keys())
    wrong = [s for s in want.keys() & got.keys() if not math.isclose(want[s], got[s], rel_tol=1e-6, abs_tol=1e-7)]
    if missing or extra or wrong:
        print(
            f"{TAG} of run {run}: {len(got)} points for {len(want)} logged steps; missing steps {missing[:10]}, "
            f"steps never logged {extra[:10]}, other values at {[(s, want[s], got[s]) for s in sorted(wrong)[:5]]}",
            file=sys.stderr,
        )
        return 1
    print(f"{len(got)} points")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
