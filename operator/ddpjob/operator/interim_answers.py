"""Counting the interim (1xx) answers http.client skips, through the one private hook
the operator uses: `http.client.HTTPResponse._read_status`.

`begin()` reads every status line through `_read_status`, and skips `100 Continue`
answers in a loop of its own until a final one: no public API says how many it skipped,
so a Pod answering interim answers without end kept it parsing until the deadline
(progress_fetch.py). Counting them there is the only way short of another HTTP client.

Guarded both ways: importing this module refuses a Python whose http.client has no such
method, and an answer whose final status line did not go through it fails the read with
an error naming the hook, so a changed http.client never reads without the cap.
"""

from __future__ import annotations

import http.client
import inspect

HOOK = "http.client.HTTPResponse._read_status"


class PrivateAPIChanged(RuntimeError):
    """http.client no longer reads status lines the way InterimCounted counts them."""


def problem() -> str | None:
    """What is wrong with the hook in this Python's http.client; None when it is as checked."""
    hook = inspect.getattr_static(http.client.HTTPResponse, "_read_status", None)
    if not inspect.isfunction(hook) or list(inspect.signature(hook).parameters) != ["self"]:
        return f"{HOOK}(self) is gone: the operator cannot count the interim answers a Pod sends"
    return None


if (_found := problem()) is not None:
    raise PrivateAPIChanged(_found)


class InterimCounted(http.client.HTTPResponse):
    """An answer that fails once more than `max_interim` interim answers came before it."""

    max_interim = 0
    interim = 0
    status_lines = 0

    def _read_status(self) -> tuple[str, int, str]:
        version, status, reason = super()._read_status()  # type: ignore[misc]
        self.status_lines += 1
        if 100 <= status < 200:
            self.interim += 1
            if self.interim > self.max_interim:
                raise ValueError(f"more than {self.max_interim} interim (1xx) answers")
        return version, status, reason

    def begin(self) -> None:
        super().begin()
        if not self.status_lines:
            raise PrivateAPIChanged(f"http.client read an answer without {HOOK}: its interim answers went uncounted")
