"""A number from outside (a value in a job's metrics file, a field of a Pod's `/progress`
answer) as a finite float, or None: a bool, a string, NaN, Infinity or an integer too large
for a float (thousands of digits) is no number. Pure; read by the curves reader and by
stall detection, each with its own range on top."""

from __future__ import annotations

import math
from typing import Any


def finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None
