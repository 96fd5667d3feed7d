"""Kubernetes' time format (RFC 3339, UTC, whole seconds: `2026-01-01T00:00:00Z`), both ways.

The one home of the format: the job logic's status times, the progress record's update
time and the dev cluster's object times all read and write it here.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

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


NEVER = datetime.min.replace(tzinfo=UTC)  # sorts before every real time


def event_seen(event: Mapping[str, Any]) -> datetime | None:
    """When an Event was last seen, as precisely as it says. `lastTimestamp` has whole
    seconds, so a job's Created, Running and Succeeded of one second would tie; its
    `eventTime` (a MicroTime: when first seen) breaks the tie when it names the same
    second. Else either one, else the object's creation; None for none readable."""
    last, precise = _read(event.get("lastTimestamp")), _read(event.get("eventTime"))
    if last and precise and precise.replace(microsecond=0) == last.replace(microsecond=0):
        return max(last, precise)
    meta = event.get("metadata")
    return last or precise or _read(meta.get("creationTimestamp") if isinstance(meta, Mapping) else None)


def event_order(event: Mapping[str, Any]) -> datetime:
    """A sort key, oldest first; an Event without a readable time first."""
    return event_seen(event) or NEVER


def _read(value: Any) -> datetime | None:
    """A time the API server (or a hostile writer) put in an Event: None when unreadable."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
