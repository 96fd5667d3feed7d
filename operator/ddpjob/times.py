"""Kubernetes' time format (RFC 3339, UTC, whole seconds: `2026-01-01T00:00:00Z`), both ways.

The one home of the format: the job logic's status times, the progress record's update
time and the dev cluster's object times all read and write it here.
"""

from __future__ import annotations

from datetime import UTC, datetime

FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def format_time(t: datetime) -> str:
    return t.astimezone(UTC).strftime(FORMAT)


def format_timestamp(seconds: float) -> str:
    """A Unix time (`time.time()`) in the same format."""
    return format_time(datetime.fromtimestamp(seconds, UTC))


def now() -> str:
    return format_time(datetime.now(UTC))


def parse_time(value: str | None) -> datetime | None:
    """None for no value; a trailing `Z` and fractions of a second are accepted."""
    if not value:
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def age(seconds: float) -> str:
    """A duration as kubectl's AGE column and `kubectl describe` say it (5s, 3m20s, 5m,
    2h10m, 3d4h, 400d, 2y30d): precise while short, coarser as it grows. The API server's
    rule (apimachinery's duration.HumanDuration), so both say the same."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    h = m // 60
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    if h < 24 * 8:
        return f"{h // 24}d{h % 24}h" if h % 24 else f"{h // 24}d"
    if h < 24 * 365 * 2:
        return f"{h // 24}d"
    y, d = h // 24 // 365, h // 24 % 365
    if h < 24 * 365 * 8 and d:
        return f"{y}y{d}d"
    return f"{y}y"


def since(value: str | None, now: datetime) -> str | None:
    """How long ago a Kubernetes time was (`age`), or None for no or an unreadable time."""
    try:
        when = parse_time(value)
    except ValueError:
        return None
    return age((now - when).total_seconds()) if when else None
