"""An unknown field and the known one it was probably meant as: `spec.nprocPerNod:
unknown field; did you mean nprocPerNode?`.

A misspelt field is the commonest mistake in a hand-written job, and the API server's
own answer (`unknown field "spec.nprocPerNod"` under strict field validation, silence
otherwise: the field is pruned) does not say what to write instead. Used by every place
that reads an object with a fixed set of fields: spec.py (the root and `spec`),
container_fields.py (`env[]`, `resources`, `checkpoint`), elastic.py, scheduling.py and
template_types.py (the Pod template's Kubernetes types).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

# A key longer than any field name is no typo of one; comparing it would only cost time.
LONGEST_TYPO = 64
# difflib's similarity ratio from which a known name is offered: one or two letters
# missing, doubled or swapped in a name of eight, not a different short word (`gpus`
# is not `gpuResource`).
CUTOFF = 0.75
# A set of known names this small is listed whole when no name is close.
FEW = 4


def closest(key: Any, known: Iterable[str], taken: Iterable[Any] = ()) -> str | None:
    """The known name `key` was probably meant as, or None; never one of `taken` (a field
    that is set was not misspelt). A difference of case alone (`claimname`) always
    matches: field names are camelCase, and YAML keys are case-sensitive."""
    if not isinstance(key, str) or not key or len(key) > LONGEST_TYPO:
        return None
    taken = set(taken)
    candidates = sorted(name for name in known if name not in taken)
    by_lower = {name.lower(): name for name in candidates}
    if key.lower() in by_lower:
        return by_lower[key.lower()]
    match = difflib.get_close_matches(key, candidates, n=1, cutoff=CUTOFF)
    return match[0] if match else None


def unknown_field(key: Any, known: Iterable[str], taken: Iterable[Any] = (), what: str = "unknown field") -> str:
    """The message for an unknown `key` of a mapping whose keys are `taken`: `what`, then
    the suggestion when there is one, or else the known names when they are few
    (`resources` has two)."""
    known = sorted(known)
    guess = closest(key, known, taken)
    if guess:
        return f"{what}; did you mean {guess}?"
    return f"{what} (known: {', '.join(known)})" if len(known) <= FEW else what


def unknown_keys(mapping: Any, known: Iterable[str]) -> list[Any]:
    """The keys of `mapping` that are not `known`, in a stable order (keys of any type)."""
    known = set(known)
    return sorted((k for k in mapping if k not in known), key=lambda k: (type(k).__name__, str(k)))
