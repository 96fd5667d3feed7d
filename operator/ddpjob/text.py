"""Text from outside (a Pod's termination message, a `/progress` answer, a status read
back) made safe for status, Events and terminals: control characters escaped, length
bounded. Newlines and tabs stay (messages have lines); ESC, BEL, backspace, carriage
return and the C1 range become `\\xNN`, so nothing reaching `kubectl describe`, `ddpjob
describe` or a log can move a terminal's cursor or rewrite what it shows. Likewise the
invisible characters that reorder or split what is shown (bidirectional overrides and
isolates such as U+202E, which can make `exit 1` read as `1 tixe`; the line and paragraph
separators U+2028/U+2029; zero-width and other format characters) and lone surrogates
become `\\uNNNN`.
"""

from __future__ import annotations

import re

# The CRD bounds condition and failure messages to this; Events are cut at 1,024.
MESSAGE_LIMIT = 4096
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064"
    "\u2066-\u206f\ufeff\ufff9-\ufffb\ud800-\udfff]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def clean(value: object, limit: int = MESSAGE_LIMIT) -> str:
    text = _CONTROL.sub(_escape, str(value))
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def plural(count: int, noun: str) -> str:
    """ "1 node", "2 nodes", "1 process", "2 processes": what users read says it right."""
    return f"{count} {noun}" + ("" if count == 1 else "es" if noun.endswith("s") else "s")


def all_of(count: int, noun: str) -> str:
    """ "all 4 nodes", but "1 node" (never "all 1 nodes")."""
    return f"all {plural(count, noun)}" if count != 1 else plural(count, noun)
