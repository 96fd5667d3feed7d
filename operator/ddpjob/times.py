"""Kubernetes' time format (RFC 3339, UTC, whole seconds: `2026-01-01T00:00:00Z`), both ways.

The one home of the format: the job logic's status times, the progress record's update
time and the dev cluster's object times all read and write it here.
"""

from __future__ import annotations

from datetime import datetime, timezone

FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def format_time(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime(FORMAT)


def format_timestamp(seconds: float) -> str:
    """A Unix time (`time.time()`) in the same format."""
    return format_time(datetime.fromtimestamp(seconds, timezone.utc))


def now() -> str:
    return format_time(datetime.now(timezone.utc))


def parse_time(value: str | None) -> datetime | None:
    """None for no value; a trailing `Z` and fractions of a second are accepted."""
    if not value:
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
