"""A job's Events as the Python client gives them: a small typed record, as Kubeflow
Trainer's `types.Event` (involved object, reason, message, time), instead of the API's
whole object (managedFields and all). Sorted oldest first by the client."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ddpjob import times


@dataclass(frozen=True)
class Event:
    """One Event: what it is about, why (`reason`: Created, Running, Restarting, NodeLost,
    Failed, ...), what it says, when it was last seen, `Normal` or `Warning`, and how many
    times it was seen."""

    involved_object_kind: str
    involved_object_name: str
    reason: str
    message: str
    event_time: datetime | None
    type: str = "Normal"
    count: int = 1

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Event:
        involved = obj.get("involvedObject")
        involved = involved if isinstance(involved, Mapping) else {}
        count = obj.get("count")
        return cls(
            involved_object_kind=_str(involved.get("kind")),
            involved_object_name=_str(involved.get("name")),
            reason=_str(obj.get("reason")),
            message=_str(obj.get("message") or obj.get("note")),
            event_time=times.event_seen(obj),
            type=_str(obj.get("type")) or "Normal",
            count=count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1,
        )


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def oldest_first(events: list[Event]) -> list[Event]:
    """By time seen; an Event without a time first."""
    return sorted(events, key=lambda e: e.event_time or times.NEVER)
