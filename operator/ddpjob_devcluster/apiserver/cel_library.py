"""The CEL environment the dev cluster's CRD validator compiles rules in, and the functions
the API server's CEL has that celpy has not (cel-go's extensions, those the CRD uses).

Users: apiserver/crd_validator.py (every rule of every served CRD).
"""

from __future__ import annotations

import re
import sys
from typing import Any

import celpy


def _environment() -> celpy.Environment:
    """One environment for every validator, made at import (celpy's `matches` is RE2
    already, as in Kubernetes). Its constructor sets the process's recursion limit to 2500:
    that lowered the operator's (handlers.py) where both run in one process (tests, the
    emulator's demo), and a limit changed while another thread builds an AST (ast.parse)
    breaks that parse with SystemError. So it is made once, here, keeping the higher limit."""
    limit = sys.getrecursionlimit()
    env = celpy.Environment()
    sys.setrecursionlimit(max(limit, sys.getrecursionlimit()))
    return env


def _format(template: Any, args: Any) -> celpy.celtypes.StringType:
    """The API server's `'...'.format([...])` (cel-go's strings extension), which celpy has
    not: %s and %d, what the CRD's messages use."""
    values = iter(args)
    return celpy.celtypes.StringType(
        re.sub(r"%[sd%]", lambda m: "%" if m.group() == "%%" else str(next(values)), str(template))
    )


ENV = _environment()
FUNCTIONS: dict[str, Any] = {"format": _format}  # celpy's union of CEL types, as its own functions are
