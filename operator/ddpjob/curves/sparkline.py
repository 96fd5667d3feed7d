"""A curve as one line of text: `loss 2.302 ▇▆▄▃▂▂▁▁ 0.118 (48 points)`.

Users: `ddpjob run`'s final summary and `ddpjob describe` (the logged training loss).
Pure. The values are put in `width` buckets of consecutive points (each bucket's mean),
and each bucket becomes one of eight block heights between the curve's lowest and
highest bucket; a flat curve is drawn at the middle height.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

BLOCKS = "▁▂▃▄▅▆▇█"
WIDTH = 24


def buckets(values: Sequence[float], width: int) -> list[float]:
    """At most `width` means of consecutive values, in order."""
    n = len(values)
    if n <= width:
        return list(values)
    edges = [round(i * n / width) for i in range(width + 1)]
    return [sum(values[a:b]) / (b - a) for a, b in itertools.pairwise(edges) if b > a]


def spark(values: Sequence[float], width: int = WIDTH) -> str:
    points = buckets([v for v in values if math.isfinite(v)], width)
    if not points:
        return ""
    low, high = min(points), max(points)
    if high == low:
        return BLOCKS[len(BLOCKS) // 2] * len(points)
    top = len(BLOCKS) - 1
    return "".join(BLOCKS[round((v - low) / (high - low) * top)] for v in points)


def number(v: float) -> str:
    return f"{v:.4g}"


def line(name: str, values: Sequence[float], width: int = WIDTH) -> str | None:
    """`name first ▇▆▄▂▁ last (N points)`; None when there is nothing to draw."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return None
    points = "point" if len(finite) == 1 else "points"
    return f"{name} {number(finite[0])} {spark(finite, width)} {number(finite[-1])} ({len(finite)} {points})"
